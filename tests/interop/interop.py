"""One lock, every language: workers in Rust, C, Python, Node, .NET, Go, the
command line and an independent redis-py implementation of the protocol all
increment one counter file, with a non-atomic read-modify-write, under one
lock, at the same time.

Pass: the counter is exact (no lost update), no two critical sections
overlap, and fencing tokens strictly increase in grant order across all
languages. Then one election, every language: the same workers campaign
instead (FENCELOCK_INTEROP_ELECT=1), each leader announcing its language, and
the same checks hold for their leaderships (epochs are fencing tokens); an
observer from the Python front must learn leaders only as they were elected,
in rising epochs. Then one semaphore of 2 permits (FENCELOCK_INTEROP_TAKE=permits:2):
never more than 2 sections at once, each permit's tokens rising; and one
read-write lock (FENCELOCK_INTEROP_TAKE=rw, every worker reading and writing in
turn): no write beside anything, the counter exact for the writes, and a
writer's token above every earlier section's and below every later one's.
Run by tests/interop/run.sh, which builds every worker first:

    python3 tests/interop/interop.py --nodes 5 --iterations 6
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, NamedTuple, Tuple

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "target"
# Where the Rust programs were built: a directory under target/ ("debug"),
# or an absolute path (the demo's release build gives its own).
PROFILE = TARGET / os.environ.get("FENCELOCK_PROFILE", "debug")
# What to build when a worker is missing.
BUILD_HINT = {
    "rust": "cargo build -p fencelock-demo",
    "c": "tests/interop/run.sh (or scripts/demo.sh)",
    "python": "scripts/test-python.sh",
    "node": "scripts/test-node.sh",
    "dotnet": "scripts/test-dotnet.sh, then tests/interop/run.sh",
    "jvm": "scripts/test-jvm.sh",
    "go": "scripts/test-go.sh, then tests/interop/run.sh",
    "cli": "cargo build -p fencelock-cli",
    "redis-py": "scripts/test-python.sh (it installs redis-py)",
}


LANGUAGES = ["rust", "c", "python", "node", "dotnet", "jvm", "go", "cli", "redis-py"]
SHOWN_AS = {
    "rust": "Rust",
    "c": "C",
    "python": "Python",
    "node": "Node",
    "dotnet": ".NET (Mono)",
    "jvm": "JVM (Java)",
    "go": "Go",
    "cli": "fencelock run",
    "redis-py": "redis-py, an independent implementation",
}


class Section(NamedTuple):
    language: str
    token: int
    start: int
    end: int
    extra: str = ""  # a permit's number, or `r` / `w` for a read or write grant


# Fronts installed from dist/ (scripts/install-fronts.sh, which the demo runs)
# instead of the repository's builds: DIR/python/venv, DIR/node/node_modules/
# fencelock, DIR/dotnet/InteropWorker.exe, DIR/jvm/classpath.txt and
# DIR/go/interop-worker.
INSTALLED = Path(os.environ["FENCELOCK_INTEROP_FRONTS"]) if os.environ.get("FENCELOCK_INTEROP_FRONTS") else None
JVM_CLASS_PATH = (INSTALLED / "jvm" if INSTALLED else ROOT / "bindings/jvm/target") / "classpath.txt"
DOTNET_DIR = INSTALLED / "dotnet" if INSTALLED else TARGET / "dotnet"
GO_WORKER = (INSTALLED if INSTALLED else TARGET) / "go" / "interop-worker"
NODE_PACKAGE = INSTALLED / "node/node_modules/fencelock" if INSTALLED else ROOT / "bindings/node"
# worker.js loads the front from here (inherited by every worker).
os.environ["FENCELOCK_NODE_PACKAGE"] = str(NODE_PACKAGE)
# The per-node timeout of every worker in a contended run (each reads
# FENCELOCK_INTEROP_NODE_TIMEOUT_MS) and of the election's observer. Nine
# processes share the machine (two cores in CI), and a scheduling stall past
# the default 100 ms fails a release, which a worker counts as fatal; a CI
# run saw one on PostgreSQL. This test checks exclusion and fencing order,
# not latency.
NODE_TIMEOUT_MS = 1000


def jvm_class_path() -> str:
    """The JVM front's jar and its dependencies, as scripts/test-jvm.sh listed them."""
    if not JVM_CLASS_PATH.exists():
        return ""
    return JVM_CLASS_PATH.read_text(encoding="utf-8").strip()


def workers(
    nodes: str, resource: str, iterations: int, counter: Path, log: Path, take: str = "lock"
) -> Dict[str, List[str]]:
    """The command of each language's worker; all share one contract (what
    they take, `take`, reaches the others through FENCELOCK_INTEROP_TAKE)."""
    independent = {"elect": ["--elect"], "rw": ["--rw"]}.get(take, [])
    if take.startswith("permits:"):
        independent = ["--permits", take.split(":")[1]]
    args = [nodes, resource, str(iterations), str(counter), str(log)]
    python = os.environ.get("FENCELOCK_PYTHON", sys.executable)
    if INSTALLED:
        python = str(INSTALLED / "python/venv/bin/python")
    return {
        "rust": [str(PROFILE / "interop-worker"), *args],
        "c": [str(PROFILE / "interop-worker-c"), *args],
        "python": [python, str(ROOT / "tests/interop/workers/worker.py"), *args],
        "node": ["node", str(ROOT / "tests/interop/workers/worker.js"), *args],
        "dotnet": ["mono", str(DOTNET_DIR / "InteropWorker.exe"), *args],
        # The jar and its dependencies (scripts/test-jvm.sh writes the list);
        # JNA loads the library from the build instead of unpacking the jar's,
        # except for an installed jar, which carries its own.
        "jvm": [
            "java",
            *([] if INSTALLED else [f"-Djna.library.path={PROFILE}"]),
            "-cp",
            jvm_class_path(),
            str(ROOT / "tests/interop/workers/Worker.java"),
            *args,
        ],
        # Built by run.sh from tests/interop/workers/go; it links bindings/go's library.
        "go": [str(GO_WORKER), *args],
        "cli": [str(ROOT / "tests/interop/workers/worker.sh"), str(PROFILE / "fencelock"), *args],
        "redis-py": [
            python,
            str(ROOT / "tests/interop/protocol_client.py"),
            "worker",
            "--nodes",
            nodes,
            "--resource",
            resource,
            "--iterations",
            str(iterations),
            "--counter-file",
            str(counter),
            "--log-file",
            str(log),
            *independent,
        ],
    }


def missing_part(name: str, command: List[str]) -> "str | None":
    """Why a worker cannot run here, or None."""
    if name == "python" or name == "redis-py":
        package = "fencelock" if name == "python" else "redis"
        if not (Path(command[0]).exists() or shutil.which(command[0])):
            return f"{command[0]} is missing"
        probe = subprocess.run([command[0], "-c", f"import {package}"], capture_output=True)
        return None if probe.returncode == 0 else f"{command[0]} cannot import {package}"
    if name == "node":
        if INSTALLED:
            return None if NODE_PACKAGE.exists() else f"{NODE_PACKAGE} is not installed"
        return None if any(NODE_PACKAGE.glob("*.node")) else "the Node addon is not built"
    if name == "dotnet":
        return None if Path(command[1]).exists() else f"{command[1]} is missing"
    if name == "jvm":
        return None if JVM_CLASS_PATH.exists() else f"{JVM_CLASS_PATH} is missing"
    program = Path(command[1] if name == "cli" else command[0])
    return None if program.exists() else f"{program} is missing"


def in_turn(urls: List[str], languages: List[str]) -> bool:
    """The demo's last scene: each language takes the same lock once, in
    turn, and the fencing tokens rise across them."""
    with tempfile.TemporaryDirectory(prefix="fencelock-demo-") as tmp:
        counter, log = Path(tmp) / "counter", Path(tmp) / "log"
        counter.write_text("0\n", encoding="utf-8")
        log.touch()
        commands = workers(",".join(urls), f"demo:every-language:{os.getpid()}", 1, counter, log)
        tokens = []
        for name in languages:
            missing = missing_part(name, commands[name])
            if missing:
                hint = BUILD_HINT[name]
                if INSTALLED and name in ("python", "node", "dotnet", "jvm", "go"):
                    hint = "scripts/install-fronts.sh, once its language is installed"
                print(f"   {SHOWN_AS[name]:<14} skipped: {missing}; build it with {hint}")
                continue
            done = subprocess.run(commands[name], capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                print(f"   {SHOWN_AS[name]:<14} FAILED: {done.stderr.strip()}")
                return False
            token = read_log(log)[-1].token
            tokens.append(token)
            print(f"   {SHOWN_AS[name]:<14} took the lock: fencing token {token}")
    rising = all(a < b for a, b in zip(tokens, tokens[1:]))
    print(f"   tokens {' < '.join(map(str, tokens))}: {'strictly increasing' if rising else 'NOT increasing'}")
    return rising


def start_nodes(count: int, store: str = "redis") -> "tuple[subprocess.Popen[str], List[str]]":
    """`count` Redis nodes, or (store "postgres") one PostgreSQL server."""
    store_args = ["--postgres"] if store == "postgres" else ["--nodes", str(count)]
    harness = subprocess.Popen(
        [str(TARGET / "debug" / "redis-nodes"), *store_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert harness.stdout is not None
    urls: List[str] = json.loads(harness.stdout.readline())["nodes"]
    return harness, urls


def read_log(log: Path) -> List[Section]:
    sections = []
    for line in log.read_text(encoding="utf-8").splitlines():
        language, token, start, end, *extra = line.split()
        sections.append(Section(language, int(token), int(start), int(end), " ".join(extra)))
    return sorted(sections, key=lambda s: s.start)


def check(sections: List[Section], counter: int, expected: int, languages: List[str]) -> List[str]:
    """Every violation found, as readable lines (empty: pass)."""
    problems = []
    if counter != expected:
        problems.append(f"counter is {counter}, expected {expected}: an update was lost")
    if len(sections) != expected:
        problems.append(f"{len(sections)} critical sections logged, expected {expected}")
    for before, after in zip(sections, sections[1:]):
        if after.start < before.end:
            problems.append(f"overlap: {before} and {after}")
        if after.token <= before.token:
            problems.append(f"token not increasing in grant order: {before} then {after}")
    missing = set(languages) - {s.language for s in sections}
    if missing:
        problems.append(f"no critical section from {sorted(missing)}")
    return problems


def most_at_once(sections: List[Section]) -> int:
    """The most sections under way at one instant (an end before a start at the same instant)."""
    edges = sorted(e for s in sections for e in ((s.start, 1), (s.end, -1)))
    inside, most = 0, 0
    for _, step in edges:
        inside += step
        most = max(most, inside)
    return most


def check_permits(sections: List[Section], counter: int, permits: int, expected: int, languages: List[str]) -> List[str]:
    """A semaphore's sections: never more than `permits` at once, each
    permit's tokens rising in grant order, the counter untouched."""
    problems = []
    if len(sections) != expected:
        problems.append(f"{len(sections)} sections logged, expected {expected}")
    if counter != 0:
        problems.append(f"a permit holder wrote the counter ({counter})")
    most = most_at_once(sections)
    if most > permits:
        problems.append(f"{most} sections at once with {permits} permits")
    for permit in sorted({s.extra for s in sections}):
        same = [s for s in sections if s.extra == permit]
        for before, after in zip(same, same[1:]):
            if after.token <= before.token:
                problems.append(f"permit {permit}: token not increasing: {before} then {after}")
    missing = set(languages) - {s.language for s in sections}
    if missing:
        problems.append(f"no section from {sorted(missing)}")
    return problems


def check_read_write(sections: List[Section], counter: int, expected: int, languages: List[str]) -> List[str]:
    """A read-write lock's sections: no write beside any other section, the
    counter exact for the writes, and a write's token above every section's
    before it and below every section's after it."""
    problems = []
    writes = [s for s in sections if s.extra == "w"]
    if len(sections) != expected:
        problems.append(f"{len(sections)} sections logged, expected {expected}")
    if counter != len(writes):
        problems.append(f"counter is {counter}, expected {len(writes)} (one per write): an update was lost")
    for write in writes:
        for other in sections:
            if other is write:
                continue
            if other.start < write.end and write.start < other.end:
                problems.append(f"a write beside another section: {write} and {other}")
            elif other.end <= write.start and other.token >= write.token:
                problems.append(f"a write's token not above an earlier section's: {other} then {write}")
            elif write.end <= other.start and other.token <= write.token:
                problems.append(f"a write's token not below a later section's: {write} then {other}")
    missing = set(languages) - {s.language for s in sections if s.extra == "w"}
    if missing:
        problems.append(f"no write from {sorted(missing)}")
    return problems


def check_observed(observed: List[Tuple[str, int]], sections: List[Section]) -> List[str]:
    """What an election's observer saw against the leaderships logged: only
    leaders that were elected (value = the language that logged that epoch),
    in strictly rising epochs, and at least one."""
    problems = []
    elected = {(s.language, s.token) for s in sections}
    if not observed:
        problems.append("the observer learned of no leader")
    for seen in observed:
        if seen not in elected:
            problems.append(f"the observer reported {seen}, which no worker logged as its leadership")
    for before, after in zip(observed, observed[1:]):
        if after[1] <= before[1]:
            problems.append(f"observed epochs not rising: {before} then {after}")
    return problems


class Observer(threading.Thread):
    """Follows an election through the Python front, recording (value, epoch)."""

    def __init__(self, urls: List[str], name: str) -> None:
        super().__init__(daemon=True)
        import fencelock

        self.client = fencelock.Client(urls, node_timeout=NODE_TIMEOUT_MS / 1000)
        self.observation = self.client.observe(name)
        self.seen: List[Tuple[str, int]] = []

    def run(self) -> None:
        for leader in self.observation:
            self.seen.append((leader.value.decode(), leader.epoch))

    def wait_subscribed(self, urls: List[str], name: str) -> None:
        """Until every node counts a subscriber on the election's channel (5 s at most)."""
        import redis

        nodes = [redis.Redis.from_url(url) for url in urls]
        channel = f"fencelock:leader:{name}"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if all(node.pubsub_numsub(channel)[0][1] for node in nodes):
                return
            time.sleep(0.02)

    def stop(self) -> List[Tuple[str, int]]:
        self.observation.close()
        self.join(timeout=10)
        self.client.close()
        return self.seen


def checker_catches_violations() -> bool:
    """The verdict must be able to fail: synthetic logs with each violation."""
    good = [Section("c", 1, 0, 10), Section("node", 2, 11, 20)]
    overlap = [Section("c", 1, 0, 10), Section("node", 2, 5, 20)]
    backwards = [Section("c", 2, 0, 10), Section("node", 1, 11, 20)]
    return (
        not check(good, 2, 2, ["c", "node"])
        and any("overlap" in p for p in check(overlap, 2, 2, ["c", "node"]))
        and any("not increasing" in p for p in check(backwards, 2, 2, ["c", "node"]))
        and any("lost" in p for p in check(good, 1, 2, ["c", "node"]))
        and any("no critical section" in p for p in check(good, 2, 2, ["c", "node", "rust"]))
        and not check_observed([("c", 1), ("node", 2)], good)
        and any("no worker logged" in p for p in check_observed([("c", 1), ("c", 2)], good))
        and any("not rising" in p for p in check_observed([("node", 2), ("c", 1)], good))
        and any("no leader" in p for p in check_observed([], good))
        and not check_permits([Section("c", 1, 0, 10, "0"), Section("node", 5, 5, 20, "1")], 0, 2, 2, ["c", "node"])
        and any("at once" in p for p in check_permits(good + [Section("rust", 3, 5, 12, "0")], 0, 1, 3, ["c"]))
        and any("permit 0" in p for p in check_permits([Section("c", 2, 0, 10, "0"), Section("c", 1, 11, 20, "0")], 0, 2, 2, ["c"]))
        and not check_read_write([Section("c", 1, 0, 10, "r"), Section("node", 2, 5, 9, "r"), Section("c", 3, 11, 20, "w")], 1, 3, ["c"])
        and any("beside" in p for p in check_read_write([Section("c", 1, 0, 10, "r"), Section("c", 3, 5, 20, "w")], 1, 2, ["c"]))
        and any("not above" in p for p in check_read_write([Section("c", 4, 0, 10, "r"), Section("c", 3, 11, 20, "w")], 1, 2, ["c"]))
        and any("lost" in p for p in check_read_write([Section("c", 3, 11, 20, "w")], 0, 1, ["c"]))
    )


def published_while(node, run):
    """run()'s result and every [channel, message] a pattern subscriber saw
    published meanwhile: all that comes before an end marker published after
    it (a subscriber gets a node's messages in the order they were sent)."""
    pubsub = node.pubsub()
    try:
        pubsub.psubscribe("*")
        confirmed = pubsub.get_message(timeout=5)
        if confirmed is None or confirmed["type"] != "psubscribe":
            raise RuntimeError(f"the subscription was not confirmed: {confirmed!r}")
        result = run()
        node.publish("vectors:end", "")
        seen = []
        while True:
            message = pubsub.get_message(timeout=5)
            if message is None:
                raise RuntimeError("the end marker never arrived")
            if message["type"] != "pmessage":
                continue
            if message["channel"] == "vectors:end":
                return result, seen
            seen.append([message["channel"], message["data"]])
    finally:
        pubsub.close()


def check_independent_implementation() -> List[str]:
    """The redis-py implementation against the shared vectors: its scripts
    (copied from the document) give the documented replies, and its keys are
    the documented keys."""
    sys.path.insert(0, str(ROOT / "tests" / "interop"))
    import redis
    from protocol_client import SOURCES, ProtocolClient

    vectors = json.loads((ROOT / "tests/vectors/protocol.json").read_text(encoding="utf-8"))
    problems = []
    harness, urls = start_nodes(1)
    try:
        node = redis.Redis.from_url(urls[0], decode_responses=True)
        for name, source in SOURCES.items():
            if hashlib.sha1(source.encode()).hexdigest() != vectors["scripts"][name]:
                problems.append(f"redis-py client: {name} differs from the vectors' SHA1")
        for case in vectors["script_cases"]:
            if case["script"] not in SOURCES:
                continue
            node.flushall()
            for command in case["setup"]:
                node.execute_command(*command)
            def run(case=case):
                return node.eval(SOURCES[case["script"]], len(case["keys"]), *case["keys"], *case["args"])

            if "published" in case:
                reply, published = published_while(node, run)
                if published != case["published"]:
                    problems.append(f"redis-py client: {case['script']} ({case['why']}) published {published!r}")
            else:
                reply = run()
            if reply != case["reply"]:
                problems.append(f"redis-py client: {case['script']} ({case['why']}) gave {reply!r}")
            for key, (low, high) in case.get("pttl_after", {}).items():
                if not low <= (left := node.pttl(key)) <= high:
                    problems.append(f"redis-py client: {case['script']} ({case['why']}) left PTTL {key} at {left}")
        # §3.3, §4.11: extending a permit keeps the semaphore's size key at least as long.
        client = ProtocolClient(urls)
        permit = client.semaphore_acquire("vectors:sem", 2, ttl_ms=500, wait_ms=1000)
        size_key = client.lock_key("vectors:sem") + ":sem:permits"
        if permit is None:
            problems.append("redis-py client: could not take a permit of an unused semaphore")
        elif not permit.extend(60000):
            problems.append("redis-py client: could not extend its permit")
        else:
            left = node.pttl(size_key)
            if left < 50000:
                problems.append(f"redis-py client: extending a permit to 60 s left {size_key} at PTTL {left}")
            permit.release()
        client.close()
        for vector in vectors["keys"]:
            client = ProtocolClient(urls, key_prefix=vector["prefix"])
            lock = client.acquire(vector["resource"], ttl_ms=5000, wait_ms=1000)
            if lock is None or node.get(vector["fence_key"]) != str(lock.fencing_token):
                problems.append(f"redis-py client: keys differ from {vector}")
            elif len(node.get(vector["lock_key"]) or "") != vectors["token"]["hex_digits"]:
                problems.append(f"redis-py client: token format differs at {vector['lock_key']}")
            if lock is not None:
                lock.release()
            client.close()
    finally:
        assert harness.stdin is not None
        harness.stdin.close()
        harness.wait(timeout=30)
    print(f"redis-py implementation vs tests/vectors/protocol.json: {'ok' if not problems else 'FAIL'}")
    return problems


# A Node holder for woken_across_languages: takes the lock, says so, releases
# when told (a line on stdin) and, once the release was answered, says when
# it called it (milliseconds of the wall clock).
NODE_HOLDER = """
const readline = require('node:readline');
const { Client } = require(process.argv[1]);
(async () => {
  const client = new Client({ nodes: process.argv[2].split(',') });
  const lock = await client.acquire(process.argv[3], { ttl: 10000, wait: 0 });
  console.log('held');
  const lines = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => lines.once('line', resolve));
  lines.close();
  const asked = Date.now();
  await lock.release();
  console.log(`released ${asked}`);
  await client.close();
})().catch((error) => { console.error(error.message); process.exit(1); });
"""


def woken_across_languages(rounds: int = 5) -> List[str]:
    """A Python waiter is woken by a Node release (protocol.md §4.9): each
    round it is granted well inside the pause a waiter without the wake-up
    would sleep (at least 1/6 of its 1 s lease), and the release sent exactly
    one wake-up."""
    import fencelock
    import redis

    harness, urls = start_nodes(1)
    problems, handoffs = [], []
    try:
        node = redis.Redis.from_url(urls[0])
        client = fencelock.Client(urls)
        for round_ in range(rounds):
            resource = f"woken-{os.getpid()}-{round_}"
            holder = subprocess.Popen(
                ["node", "-e", NODE_HOLDER, str(ROOT / "bindings/node"), ",".join(urls), resource],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert holder.stdin is not None and holder.stdout is not None
            if holder.stdout.readline().strip() != "held":
                problems.append("the Node holder did not take the lock")
                break
            granted: List[float] = []
            waiter = threading.Thread(target=lambda: granted.append(wait_for(client, resource)))
            waiter.start()
            while node.zcard(f"fencelock:{{{resource}}}:queue") == 0:  # the Python waiter is in line
                time.sleep(0.005)
            wakes = node.info("commandstats").get("cmdstat_publish", {}).get("calls", 0)
            holder.stdin.write("release\n")
            holder.stdin.flush()
            # Timed on the wall clock from when the Node process called release
            # (it says when), so the gap leaves out how long it took to read
            # the line on stdin.
            said = holder.stdout.readline().split()
            released = int(said[1]) / 1000 if said[:1] == ["released"] and len(said) == 2 else None
            if released is None:
                problems.append(f"round {round_}: the Node holder did not release")
            waiter.join(timeout=15)
            holder.wait(timeout=15)
            woke = node.info("commandstats").get("cmdstat_publish", {}).get("calls", 0) - wakes
            if not granted:
                problems.append(f"round {round_}: the Python waiter was never granted")
                continue
            if released is not None:
                handoffs.append(granted[0] - released)
            if woke != 1:
                problems.append(f"round {round_}: the Node release sent {woke} wake-ups, expected 1")
        client.close()
    finally:
        assert harness.stdin is not None
        harness.stdin.close()
        harness.wait(timeout=30)
    # A waiter left to its pause would sleep at least 166 ms.
    if handoffs and max(handoffs) >= 0.15:
        problems.append(f"a Python waiter took {max(handoffs) * 1000:.0f} ms after the Node release: not woken")
    shown = ", ".join(f"{h * 1000:.1f}" for h in handoffs)
    print(f"a Python waiter woken by a Node release: granted {shown} ms after it, one wake-up each")
    return problems


def wait_for(client: "object", resource: str) -> float:
    """Waits for the lock through the Python front; the moment it was granted
    (wall clock, to compare with another process's)."""
    lock = client.acquire(resource, ttl=10, wait=10)  # type: ignore[attr-defined]
    granted = time.time()
    lock.release()
    return granted


def run(node_count: int, iterations: int, languages: List[str], take: str = "lock", store: str = "redis") -> bool:
    harness, urls = start_nodes(node_count, store)
    observer = None
    elect = take == "elect"
    try:
        with tempfile.TemporaryDirectory(prefix="fencelock-interop-") as tmp:
            counter, log = Path(tmp) / "counter", Path(tmp) / "log"
            counter.write_text("0\n", encoding="utf-8")
            log.touch()
            resource = f"interop-{store}-{take.replace(':', '-')}-{node_count}-{os.getpid()}"
            every = workers(",".join(urls), resource, iterations, counter, log, take)
            commands = {name: every[name] for name in languages}
            env = {
                **os.environ,
                "FENCELOCK_INTEROP_ELECT": "1" if elect else "0",
                "FENCELOCK_INTEROP_TAKE": take,
                "FENCELOCK_INTEROP_NODE_TIMEOUT_MS": str(NODE_TIMEOUT_MS),
            }
            if elect:
                observer = Observer(urls, resource)
                observer.start()
                observer.wait_subscribed(urls, resource)
            running = {
                name: subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env) for name, cmd in commands.items()
            }
            failed = []
            for name, process in running.items():
                _, stderr = process.communicate(timeout=600)
                if process.returncode != 0:
                    failed.append(f"{name} worker exited {process.returncode}: {stderr.strip()}")
            sections = read_log(log)
            expected = iterations * len(commands)
            written = int(counter.read_text().strip())
            if take.startswith("permits:"):
                problems = failed + check_permits(sections, written, int(take.split(":")[1]), expected, list(commands))
            elif take == "rw":
                problems = failed + check_read_write(sections, written, expected, list(commands))
            else:
                problems = failed + check(sections, written, expected, list(commands))
            if observer is not None:
                observed = observer.stop()
                problems += check_observed(observed, sections)
    finally:
        assert harness.stdin is not None
        harness.stdin.close()
        harness.wait(timeout=30)
    per_language = Counter(s.language for s in sections)
    what = {"elect": ", one election", "rw": ", one read-write lock"}.get(take, "")
    if store == "postgres":
        what = " (PostgreSQL)" + what
    if take.startswith("permits:"):
        what = f", one semaphore of {take.split(':')[1]} permits"
    print(
        f"{node_count} node(s){what}: {len(sections)} "
        + ("leaderships" if elect else "critical sections")
        + " from "
        + ", ".join(f"{lang} {n}" for lang, n in sorted(per_language.items()))
    )
    if take.startswith("permits:") or take == "rw":
        readers = [s for s in sections if s.extra == "r"]
        shared = sum(1 for a in readers for b in readers if a is not b and a.start < b.end and b.start < a.end) // 2
        print(f"  at most {most_at_once(sections)} at once" + (f"; {shared} pairs of reads overlapped" if take == "rw" else ""))
    if observer is not None:
        learned = " → ".join(f"{value}:{epoch}" for value, epoch in observed[:8])
        print(f"  the Python observer learned of {len(observed)} of them by push, epochs rising: {learned}")
    if sections and take in ("lock", "elect"):
        print(f"  fencing tokens {sections[0].token} … {sections[-1].token}, strictly increasing in grant order")
        print("  first grants: " + " → ".join(f"{s.language}:{s.token}" for s in sections[:8]))
    for problem in problems:
        print(f"  FAIL {problem}")
    return not problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append", help="node counts to run with (default: 5 and 1)")
    parser.add_argument("--iterations", type=int, default=6, help="critical sections per worker")
    parser.add_argument(
        "--languages",
        default=",".join(LANGUAGES),
        help=f"comma-separated subset of {','.join(LANGUAGES)} (default: all; CI runs all)",
    )
    parser.add_argument("--in-turn", metavar="URLS", help="demo mode: each language takes the lock once on these nodes")
    options = parser.parse_args()
    languages = options.languages.split(",")
    unknown = set(languages) - set(LANGUAGES)
    if unknown:
        parser.error(f"unknown languages {sorted(unknown)}")
    if options.in_turn:
        return 0 if in_turn(options.in_turn.split(","), languages) else 1
    results = [checker_catches_violations()]
    if not results[0]:
        print("FAIL the checker missed a synthetic violation")
    if "redis-py" in languages:
        problems = check_independent_implementation()
        for problem in problems:
            print(f"  FAIL {problem}")
        results.append(not problems)
    if {"python", "node"} <= set(languages):
        problems = woken_across_languages()
        for problem in problems:
            print(f"  FAIL {problem}")
        results.append(not problems)
    results += [run(count, options.iterations, languages) for count in options.nodes or [5, 1]]
    results.append(run(3, max(2, options.iterations // 2), languages, take="elect"))
    results.append(run(3, max(2, options.iterations // 2), languages, take="permits:2"))
    results.append(run(3, max(4, options.iterations // 2), languages, take="rw"))
    # One PostgreSQL server as the node: every front speaks to it through the
    # core (the independent client speaks Redis only).
    sql_languages = [name for name in languages if name != "redis-py"]
    results.append(run(1, options.iterations, sql_languages, store="postgres"))
    print("interop:", "PASS" if all(results) else "FAIL")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
