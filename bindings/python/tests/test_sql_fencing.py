"""The SQL fencing pattern of docs/protocol.md §6, run as written (SQLite).

The statements are read from the document, so the pattern users copy is the
one tested: a larger token writes, the same grant may write again, and a
second grant with an equal token (a repeat after a lost counter) may not.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import fencelock
from fencelock import Client

PROTOCOL = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def _statements() -> tuple[str, str]:
    """The CREATE TABLE and the guarded UPDATE of §6, in SQLite's parameter style."""
    section = PROTOCOL.read_text(encoding="utf-8").split("## 6.")[1]
    sql = re.search(r"```sql\n(.*?)```", section, re.S)
    assert sql is not None, "§6 has no sql block"
    create, update = [s.strip() for s in sql.group(1).split(";") if s.strip()]
    create = re.sub(r"--[^\n]*", "", create)
    return create, re.sub(r"\$(\d)", r"?\1", update)


def test_the_documented_sql_guard_refuses_an_equal_token_from_another_grant(
    url: str, resource: str
) -> None:
    create, update = _statements()
    db = sqlite3.connect(":memory:")
    db.execute(create)
    db.execute("INSERT INTO inventory (sku, stock) VALUES ('sku-1', 10)")

    def write(stock: int, fence: fencelock.Fence) -> int:
        return db.execute(update, (stock, fence.token, fence.holder, "sku-1")).rowcount

    client = Client(url)
    with client.lock(resource, ttl=5) as first:
        assert write(9, first.fence) == 1
        assert write(8, first.fence) == 1, "the same grant may write again"
        # Another grant that got the same token (after a node lost its counter).
        twin = fencelock.Fence(first.fencing_token, first.fence.holder % (2**63 - 1) + 1)
        assert write(7, twin) == 0, "an equal token from another grant must be refused"
        assert write(7, fencelock.Fence(first.fencing_token)) == 0, (
            "a bare equal token must be refused"
        )
    with client.lock(resource, ttl=5) as second:
        assert write(6, second.fence) == 1, "a newer token writes"
    assert write(5, first.fence) == 0, "an older token is refused"
    assert db.execute("SELECT stock FROM inventory").fetchone() == (6,)
