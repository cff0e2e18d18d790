"""Interop worker (Python front): ITERATIONS times, take the lock, do a
non-atomic read-modify-write of the counter file, log the critical section.
FENCELOCK_INTEROP_TAKE says what it takes instead of the lock: `elect`
campaigns (announcing "python", also FENCELOCK_INTEROP_ELECT=1) and logs the
epoch; `permits:K` takes one of K permits of the semaphore RESOURCE, leaves
the counter alone and logs the permit as a fifth field; `rw` reads (even
iterations, counter untouched, fifth field `r`) and writes (odd, `w`) the
read-write lock RESOURCE. FENCELOCK_INTEROP_NODE_TIMEOUT_MS, if set (not empty),
is the per-node timeout in milliseconds (anything else fails the worker).

    python worker.py NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
"""

import os
import sys
import time

import fencelock


def take_mode() -> str:
    if os.environ.get("FENCELOCK_INTEROP_ELECT") == "1":
        return "elect"
    return os.environ.get("FENCELOCK_INTEROP_TAKE", "lock")


def main() -> None:
    nodes, resource, iterations, counter, log = sys.argv[1:6]
    mode = take_mode()
    timeout_ms = os.environ.get("FENCELOCK_INTEROP_NODE_TIMEOUT_MS")
    # (int() would also take spaces, a sign and underscores.)
    if timeout_ms and not (timeout_ms.isascii() and timeout_ms.isdigit()):
        sys.exit(
            f"FENCELOCK_INTEROP_NODE_TIMEOUT_MS is not a number of milliseconds: {timeout_ms!r}"
        )
    node_timeout = int(timeout_ms) / 1000 if timeout_ms else None
    with fencelock.Client(nodes.split(","), node_timeout=node_timeout) as client:
        for i in range(int(iterations)):
            writes, extra = True, ""
            if mode == "elect":
                held = client.campaign(resource, ttl=10, wait=120, value="python")
            elif mode.startswith("permits:"):
                held = client.semaphore(resource, int(mode.split(":")[1])).permit(ttl=10, wait=120)
                writes = False
            elif mode == "rw":
                rw = client.rw_lock(resource)
                writes = i % 2 == 1
                held = rw.write(ttl=10, wait=120) if writes else rw.read(ttl=10, wait=120)
                extra = " w" if writes else " r"
            else:
                held = client.lock(resource, ttl=10, wait=120)
            with held as lock:  # a leadership's fencing token is its epoch
                start = time.time_ns()
                if writes:
                    with open(counter, encoding="utf-8") as f:
                        value = int(f.read().strip() or 0)
                time.sleep(0.003)  # widen the window a lost update needs
                if writes:
                    with open(counter, "w", encoding="utf-8") as f:
                        f.write(f"{value + 1}\n")
                if mode.startswith("permits:"):
                    extra = f" {lock.permit}"
                line = f"python {lock.fencing_token} {start} {time.time_ns()}{extra}\n"
                with open(log, "a", encoding="utf-8") as f:
                    f.write(line)


if __name__ == "__main__":
    main()
