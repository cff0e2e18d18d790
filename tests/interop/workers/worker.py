"""Interop worker (Python front): ITERATIONS times, take the lock, do a
non-atomic read-modify-write of the counter file, log the critical section.
With FENCELOCK_INTEROP_ELECT=1 it campaigns instead (announcing "python") and
logs its epoch.

    python worker.py NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
"""

import os
import sys
import time

import fencelock


def main() -> None:
    nodes, resource, iterations, counter, log = sys.argv[1:6]
    elect = os.environ.get("FENCELOCK_INTEROP_ELECT") == "1"
    with fencelock.Client(nodes.split(",")) as client:
        for _ in range(int(iterations)):
            held = (
                client.campaign(resource, ttl=10, wait=120, value="python")
                if elect
                else client.lock(resource, ttl=10, wait=120)
            )
            with held as lock:  # a leadership's fencing token is its epoch
                start = time.time_ns()
                with open(counter, encoding="utf-8") as f:
                    value = int(f.read().strip() or 0)
                time.sleep(0.003)  # widen the window a lost update needs
                with open(counter, "w", encoding="utf-8") as f:
                    f.write(f"{value + 1}\n")
                line = f"python {lock.fencing_token} {start} {time.time_ns()}\n"
                with open(log, "a", encoding="utf-8") as f:
                    f.write(line)


if __name__ == "__main__":
    main()
