"""The exception hierarchy: one class per error kind of the Rust core.

Naming: the kind's name in CamelCase plus ``Error`` (``not_held`` is
``NotHeldError``), except ``timeout`` and ``lost``, which read ``LockTimeoutError``
and ``LockLostError`` so they do not pass for the built-in ``TimeoutError`` or
a lost connection. ``tests/test_errors.py`` holds every front-wide kind to it.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple

__all__ = [
    "NodeReport",
    "FenceLockError",
    "NotAcquiredError",
    "LockTimeoutError",
    "UnavailableError",
    "LockLostError",
    "NotHeldError",
    "StaleTokenError",
    "InvalidArgumentError",
    "ConfigError",
    "AuthError",
    "TlsError",
    "ClosedError",
    "WouldBlockError",
    # Not CancelledError: `from fencelock import *` would shadow
    # asyncio.CancelledError, the exception a cancelled task raises.
    "InternalError",
    "NotAcquired",
    "LockTimeout",
    "Unavailable",
    "LockLost",
    "NotHeld",
    "StaleToken",
    "InvalidArgument",
    "Closed",
    "WouldBlock",
]


class NodeReport(NamedTuple):
    """What one node answered to one operation."""

    node: str
    """The node's URL, without password."""
    outcome: str
    """``ok``, ``held_by_other``, ``missing``, ``timed_out``, ``failed`` or ``pending``."""
    detail: str
    """The outcome in words (for ``failed``: the node's or connection's own message)."""


class FenceLockError(Exception):
    """Base class of every fencelock error.

    ``str(err)`` is the core's message: what failed, on which resource and
    nodes, and what to do. Attributes: ``kind`` (the core's error kind, e.g.
    ``"not_acquired"``), ``code`` (its stable number), ``resource`` (or
    None) and ``nodes`` (a list of :class:`NodeReport`, empty when no node
    was involved).
    """

    kind: str = "error"
    code: int = 0
    resource: Optional[str]
    nodes: Tuple[NodeReport, ...]

    def __init__(
        self,
        message: str = "",
        resource: Optional[str] = None,
        nodes: Sequence[Tuple[str, str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.resource = resource
        self.nodes = tuple(NodeReport(*n) for n in nodes)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # Positional arguments only, so errors pickle across processes.
        return (type(self), (str(self), self.resource, tuple(tuple(n) for n in self.nodes)))


class NotAcquiredError(FenceLockError):
    """The lock is held by someone else (a single attempt, ``wait=0``)."""

    kind = "not_acquired"
    code = 1


class LockTimeoutError(FenceLockError):
    """The ``wait`` deadline passed before the lock could be taken."""

    kind = "timeout"
    code = 2


class UnavailableError(FenceLockError):
    """Not enough nodes answered to decide: Redis unreachable, paused or erroring."""

    kind = "unavailable"
    code = 3


class LockLostError(FenceLockError):
    """The lock was lost while held (key deleted, expired or taken over)."""

    kind = "lost"
    code = 4


class NotHeldError(FenceLockError):
    """The lock was no longer held when released or extended."""

    kind = "not_held"
    code = 5


class StaleTokenError(FenceLockError):
    """A fenced write carried a token older than the one already stored."""

    kind = "stale_token"
    code = 6


class InvalidArgumentError(FenceLockError, ValueError):
    """An argument is out of range (empty resource, bad ttl, NaN, bool…)."""

    kind = "invalid_argument"
    code = 7


class ConfigError(FenceLockError, ValueError):
    """The client configuration is invalid (bad URL, no nodes, zero timeout…)."""

    kind = "config"
    code = 8


class AuthError(FenceLockError):
    """Redis refused the credentials, or the ACL user lacks a permission."""

    kind = "auth"
    code = 9


class TlsError(FenceLockError):
    """The TLS handshake or certificate verification failed."""

    kind = "tls"
    code = 10


class ClosedError(FenceLockError):
    """The client is closed, or was made before ``fork()`` and used in the child."""

    kind = "closed"
    code = 11


class WouldBlockError(FenceLockError):
    """A blocking call was made where it would deadlock (inside the core's runtime)."""

    kind = "would_block"
    code = 12


class CancelledError(FenceLockError):
    """An operation stopped through the core's canceller.

    Python code does not see it: a cancelled asyncio task raises
    :class:`asyncio.CancelledError`, and Ctrl-C during a blocking call
    ``KeyboardInterrupt``, as usual. The class completes the table of kinds.
    """

    kind = "cancelled"
    code = 102


class InternalError(FenceLockError):
    """A bug in fencelock: a panic inside it was caught before it reached you."""

    kind = "internal"
    code = 200


# The names of version 0.1, before every class ended in ``Error``: the same
# classes, so ``except NotAcquired`` keeps working.
NotAcquired = NotAcquiredError
LockTimeout = LockTimeoutError
Unavailable = UnavailableError
LockLost = LockLostError
NotHeld = NotHeldError
StaleToken = StaleTokenError
InvalidArgument = InvalidArgumentError
Closed = ClosedError
WouldBlock = WouldBlockError

_BY_KIND = {cls.kind: cls for cls in FenceLockError.__subclasses__()}


def _from_core(
    kind: str,
    code: int,
    message: str,
    resource: Optional[str],
    nodes: Sequence[Tuple[str, str, str]],
) -> FenceLockError:
    """Builds the exception for a core error (called by the native module)."""
    cls = _BY_KIND.get(kind)
    if cls is None:
        # A kind newer than this module: keep its name and number.
        err = FenceLockError(message, resource, nodes)
        err.kind, err.code = kind, code
        return err
    return cls(message, resource, nodes)
