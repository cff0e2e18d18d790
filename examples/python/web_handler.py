"""An asyncio web handler that answers 409 Conflict while the resource is busy.

    python examples/python/web_handler.py [--nodes URL...]

A minimal HTTP server (asyncio streams, no framework) exposes
``POST /orders/<id>/pay``. The handler takes the order's lock with one
attempt; a double-click or a retrying client that arrives while the first
payment is in progress gets 409 instead of paying twice. The script starts
the server, fires five concurrent requests for one order, and checks that
exactly one was processed.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Tuple

import fencelock
from _nodes import redis_nodes


async def pay(client: fencelock.AsyncClient, order_id: str) -> Tuple[int, str]:
    """The handler: (status, body)."""
    lock = await client.try_acquire(f"order:{order_id}", ttl=10)
    if lock is None:
        return 409, f"order {order_id} is being processed by another request\n"
    async with lock:
        await asyncio.sleep(0.3)  # call the payment provider
        # Record the payment only if no newer holder has written since.
        await client.fenced_set(f"order:{order_id}:state", "paid", lock.fence)
        return 200, f"order {order_id} paid (fencing token {lock.fencing_token})\n"


def serve(client: fencelock.AsyncClient):  # type: ignore[no-untyped-def]
    async def handle(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        request_line = (await reader.readline()).decode()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass  # headers
        method, path, _ = request_line.split(" ", 2)
        parts = path.strip("/").split("/")
        if (
            method == "POST"
            and len(parts) == 3
            and parts[0] == "orders"
            and parts[2] == "pay"
        ):
            status, body = await pay(client, parts[1])
        else:
            status, body = 404, "not found\n"
        reason = {200: "OK", 404: "Not Found", 409: "Conflict"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n{body}".encode()
        )
        await writer.drain()
        writer.close()

    return handle


async def post(port: int, path: str) -> Tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n".encode()
    )
    await writer.drain()
    response = (await reader.read()).decode()
    writer.close()
    status = int(response.split(" ", 2)[1])
    return status, response.split("\r\n\r\n", 1)[1]


async def run(nodes: list[str]) -> None:
    client = await fencelock.AsyncClient.connect(nodes)
    server = await asyncio.start_server(serve(client), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    order = uuid.uuid4().hex[:6]
    async with server:
        results = await asyncio.gather(
            *(post(port, f"/orders/{order}/pay") for _ in range(5))
        )
        for status, body in results:
            print(status, body, end="")
        statuses = sorted(status for status, _ in results)
        assert statuses == [200, 409, 409, 409, 409], statuses
        # Once the first payment is done, the order is free again.
        status, body = await post(port, f"/orders/{order}/pay")
        print(status, body, end="")
        assert status == 200


def main() -> None:
    with redis_nodes(1) as nodes:
        asyncio.run(run(nodes))
        print("ok")


if __name__ == "__main__":
    main()
