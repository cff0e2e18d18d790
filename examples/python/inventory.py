"""Inventory with fencing: no overselling, and a paused writer is refused.

    python examples/python/inventory.py [--nodes URL...]

1. Eight buyers race for 20 items without a lock: they oversell.
2. The same race under a fencelock lock sells exactly 20.
3. A buyer pauses past its lease (a GC pause, a VM freeze); another buyer
   takes the lock and writes; the paused buyer's late write carries an old
   fencing token and the stock refuses it.
"""

from __future__ import annotations

import threading
import time
import uuid

import fencelock
from _nodes import redis_nodes

STOCK = 20
RUN = uuid.uuid4().hex[:8]  # fresh keys each run, so reruns on the same nodes work
BUYERS = 8


# Without a lock every buyer writes as one and the same holder of token 0:
# the fence lets each write through, as plain storage would.
NO_LOCK = fencelock.Fence(0, 1)


def race(client: fencelock.Client, key: str, locked: bool) -> int:
    """Each buyer reads the stock, thinks, and writes stock-1; returns items sold."""
    client.fenced_set(key, str(STOCK), NO_LOCK)
    sold = 0
    count = threading.Lock()

    def buyer() -> None:
        nonlocal sold
        while True:
            if locked:
                with client.lock(f"inventory:sku-1:{RUN}", ttl=5, wait=30) as lock:
                    done = buy_one(client, key, lock.fence)
            else:
                done = buy_one(client, key, NO_LOCK)
            if done:
                return
            with count:
                sold += 1

    threads = [threading.Thread(target=buyer) for _ in range(BUYERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sold


def buy_one(client: fencelock.Client, key: str, fence: fencelock.Fence) -> bool:
    """Takes one item; True when sold out."""
    value, _ = client.fenced_get(key) or ("0", 0)
    stock = int(value)
    if stock <= 0:
        return True
    time.sleep(0.002)  # the time it takes to charge the card
    client.fenced_set(key, str(stock - 1), fence)
    return False


def paused_writer(client: fencelock.Client, key: str) -> None:
    slow = client.acquire(f"inventory:sku-2:{RUN}", ttl=0.2, auto_renew=False)
    print(f"  buyer A holds the lock with token {slow.fencing_token}, then freezes...")
    time.sleep(0.4)  # past its lease
    with client.lock(f"inventory:sku-2:{RUN}", ttl=5) as fast:
        print(f"  buyer B takes the lock with token {fast.fencing_token} and writes")
        client.fenced_set(key, "9", fast.fence)
    print(f"  buyer A wakes up; is_held() = {slow.is_held()}; it writes anyway:")
    try:
        client.fenced_set(key, "10", slow.fence)
    except fencelock.StaleTokenError as err:
        print(f"  refused: {err}")
    else:
        raise SystemExit("the stale write went through!")


def main() -> None:
    with redis_nodes(3) as nodes:
        client = fencelock.Client(nodes)
        print(f"Redlock over {len(nodes)} nodes: {nodes}")
        sold = race(client, f"stock:sku-1:nolock:{RUN}", locked=False)
        print(
            f"without a lock: {sold} sold from a stock of {STOCK} (oversold by {sold - STOCK})"
        )
        sold = race(client, f"stock:sku-1:locked:{RUN}", locked=True)
        print(f"with fencelock:  {sold} sold from a stock of {STOCK}")
        assert sold == STOCK, sold
        print("a paused writer:")
        paused_writer(client, f"stock:sku-2:{RUN}")
        assert client.fenced_get(f"stock:sku-2:{RUN}") is not None
        print("ok")


if __name__ == "__main__":
    main()
