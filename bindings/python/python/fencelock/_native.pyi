"""Type stubs of the compiled module ``fencelock._native``."""

import datetime
from collections.abc import Callable, Coroutine, Generator, Sequence
from types import TracebackType
from typing import Any, Literal, Optional, Union, final, type_check_only

from typing_extensions import Self, TypedDict, Unpack, disjoint_base

from ._metrics import Metrics

_Seconds = Union[int, float, datetime.timedelta]
"""A duration in seconds (int or float), or a ``timedelta``."""

_Pem = Union[str, bytes]
_TlsVersion = Literal["1.2", "1.3"]
"""The oldest TLS version accepted from ``rediss://`` nodes: ``"1.2"`` (default) or ``"1.3"``.

Any other string raises ``ConfigError``; anything but a string (such as the float ``1.3``)
raises ``TypeError``. ``"1.3"`` cannot be applied to ``rediss+cluster://`` nodes
(``ConfigError``: restrict those with the servers' ``tls-protocols``).
"""
_LeaderValue = Union[bytes, str]
"""What a leader announces: bytes, or text (sent as UTF-8); at most ``MAX_LEADER_VALUE`` bytes."""
_OnLost = Callable[[str, str], object]
"""``on_lost(resource, reason)``, called on a worker thread when a held lock is lost."""

@type_check_only
class ClientOptions(TypedDict, total=False):
    """The keyword options of ``Client(nodes, **options)``, ``AsyncClient(nodes, **options)``
    and ``AsyncClient.connect(nodes, **options)``. ``None`` keeps the default."""

    key_prefix: Optional[str]
    node_timeout: Optional[_Seconds]
    connect_timeout: Optional[_Seconds]
    drift_factor: Optional[float]
    retry: Optional[tuple[_Seconds, _Seconds]]
    default_ttl: Optional[_Seconds]
    default_wait: Optional[_Seconds]
    auto_renew: Optional[bool]
    username: Optional[str]
    password: Optional[str]
    tls_ca_pem: Optional[_Pem]
    tls_client_cert_pem: Optional[_Pem]
    tls_client_key_pem: Optional[_Pem]
    tls_min_version: Optional[_TlsVersion]
    allow_mixed_tls: Optional[bool]

@type_check_only
class LockOptions(TypedDict, total=False):
    """The keyword options of ``acquire``, ``try_acquire`` and ``lock`` (both clients), of
    ``acquire``, ``try_acquire`` and ``permit`` (both semaphore classes), and of
    ``acquire_read``, ``acquire_write``, ``try_read``, ``try_write``, ``read`` and ``write``
    (both read-write lock classes). ``None`` keeps the default."""

    auto_renew: Optional[bool]
    max_hold: Optional[_Seconds]
    max_renewals: Optional[int]
    fair: Optional[bool]
    on_lost: Optional[_OnLost]

def settle(timeout: float = 2.0) -> bool:
    """Waits until no client of this process has clean-up running in the background."""

def _bench_core(
    client: Client, prefix: str, cycles: int, concurrency: int = 1, ttl: float = 10.0
) -> float:
    """Benchmark helper: acquire+release cycles in the Rust core alone; the elapsed seconds."""

_build_profile: Literal["debug", "release"]
"""How this module was built: ``"debug"`` with debug assertions on (cargo's dev profile),
``"release"`` without."""

# The core's events to logging (private: fencelock/_logging.py wraps them). Levels
# are the core's numbers: 1 error, 2 warn, 3 info, 4 debug, 5 trace; None is none.
def _forward_logs(
    sink: Callable[[int, str, str, tuple[tuple[str, str], ...], str], object],
    level: Optional[int],
) -> None:
    """Calls ``sink(level, target, message, fields, line)`` for each core event at ``level``
    and above, on fencelock's log delivery thread."""

def _set_log_level(level: Optional[int]) -> None:
    """Forwards at ``level`` from now on."""

def _log_level() -> Optional[int]:
    """The level forwarded at now."""

def _close_logs() -> None:
    """Forwards nothing more and never calls Python again (at interpreter exit)."""

MIN_TTL: float
"""Shortest ttl accepted, in seconds."""
MAX_TTL: float
"""Longest ttl accepted, in seconds."""
MAX_WAIT: float
"""Longest wait accepted, in seconds (366 days)."""
MAX_RESOURCE_LEN: int
"""Longest resource name (and fenced key), in bytes of UTF-8."""
MAX_PREFIX_LEN: int
"""Longest key prefix, in bytes of UTF-8."""
MAX_DRIFT_FACTOR: float
"""Largest clock-drift factor a client accepts."""
MAX_FENCING_TOKEN: int
"""Largest fencing token handed out (2**53 - 1)."""
MAX_HOLDER_ID: int
"""Largest holder id of a fence (fits a signed 64-bit SQL column)."""
MAX_LEADER_VALUE: int
"""Longest value a leader may announce, in bytes."""
MAX_PERMITS: int
"""Most permits a semaphore may have (256)."""
METRIC_NAMES: dict[str, str]
"""Each key of ``client.metrics()`` -> the name it is exported under (Prometheus
style: ``fencelock_acquired_total``, ``fencelock_held``, ...), as the Rust core's
``metrics`` facade and ``fencelock.prometheus.Collector`` report it."""
LATENCY_BUCKETS: tuple[float, ...]
"""The upper bounds of the acquire-latency buckets, in seconds."""
__version__: str
__all__ = [
    "AsyncClient",
    "AsyncLeadership",
    "AsyncLock",
    "AsyncLockContext",
    "AsyncObservation",
    "AsyncRwLock",
    "AsyncSemaphore",
    "Client",
    "Fence",
    "LATENCY_BUCKETS",
    "Leader",
    "Leadership",
    "Lock",
    "LockContext",
    "LostSignal",
    "MAX_DRIFT_FACTOR",
    "MAX_FENCING_TOKEN",
    "MAX_HOLDER_ID",
    "MAX_LEADER_VALUE",
    "MAX_PERMITS",
    "Observation",
    "MAX_PREFIX_LEN",
    "MAX_RESOURCE_LEN",
    "MAX_TTL",
    "MAX_WAIT",
    "METRIC_NAMES",
    "MIN_TTL",
    "RwLock",
    "Semaphore",
    "__version__",
    "settle",
]

@final
class Fence:
    """What a fenced write carries: a fencing token and the holder id of its grant.

    Storage accepts it over an equal token only from the same grant. ``str(fence)`` is
    ``"token:holder"``. ``Fence(token)`` is a bare token (holder 0): it writes only where
    every stored token is older.
    """

    def __new__(cls, token: int, holder: Optional[int] = None) -> Self: ...
    @staticmethod
    def parse(text: str) -> Fence: ...
    @property
    def token(self) -> int: ...
    @property
    def holder(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

_FenceArg = Union[Fence, str, int]
"""A fence (``lock.fence``), its text ``"token:holder"``, or a bare int token."""

@final
class LostSignal:
    """Set when the lock is lost while held; never after a clean release."""

    def is_set(self) -> bool: ...
    @property
    def reason(self) -> Optional[str]: ...
    def wait(self, timeout: Optional[_Seconds] = None) -> bool: ...
    def wait_async(self, timeout: Optional[_Seconds] = None) -> Coroutine[Any, Any, bool]: ...
    def __await__(self) -> Generator[Any, None, bool]: ...

@disjoint_base
class _LockBase:
    """What :class:`Lock` and :class:`AsyncLock` share (a private base class)."""

    @property
    def resource(self) -> str: ...
    @property
    def permit(self) -> Optional[int]:
        """Which permit (0-based) a semaphore's permit holds; None for a plain lock."""
    @property
    def fencing_token(self) -> int: ...
    @property
    def fence(self) -> Fence: ...
    def is_held(self) -> bool: ...
    @property
    def remaining(self) -> float: ...
    @property
    def status(self) -> str: ...
    @property
    def renewals(self) -> int: ...
    @property
    def lost(self) -> LostSignal: ...

@final
class Lock(_LockBase):
    """A held lock (sync API); a context manager that releases on exit."""

    def extend(self, ttl: _Seconds) -> None: ...
    def release(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

@final
class AsyncLock(_LockBase):
    """A held lock (asyncio API); an async context manager that releases on exit."""

    def extend(self, ttl: _Seconds) -> Coroutine[Any, Any, None]: ...
    def release(self) -> Coroutine[Any, Any, None]: ...
    def __aenter__(self) -> Coroutine[Any, Any, Self]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> Coroutine[Any, Any, None]: ...

@disjoint_base
class _LeadershipBase(_LockBase):
    """What :class:`Leadership` and :class:`AsyncLeadership` share (a private base class).

    A leadership is a lock on the election's name: ``epoch`` is its fencing token, ``name``
    its resource, ``is_leader()`` its ``is_held()``; ``lost`` and ``fence`` are the lock's.
    """

    @property
    def name(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def value(self) -> bytes: ...
    def is_leader(self) -> bool: ...

@final
class Leadership(_LeadershipBase):
    """Leadership of an election (sync API); a context manager that resigns on exit."""

    def resign(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

@final
class AsyncLeadership(_LeadershipBase):
    """Leadership of an election (asyncio API); an async context manager that resigns on exit."""

    def resign(self) -> Coroutine[Any, Any, None]: ...
    def __aenter__(self) -> Coroutine[Any, Any, Self]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> Coroutine[Any, Any, None]: ...

@final
class Leader:
    """A leader as observers learn of it: the value it announced and its epoch."""

    def __new__(cls, value: _LeaderValue, epoch: int) -> Self: ...
    @property
    def value(self) -> bytes: ...
    @property
    def epoch(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Observation:
    """The leaders of one election (``Client.observe``): an iterator; closes on ``with`` exit."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> Leader: ...
    def next(self, timeout: Optional[_Seconds] = None) -> Optional[Leader]: ...
    @property
    def name(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

@final
class AsyncObservation:
    """The leaders of one election (``AsyncClient.observe``): an async iterator."""

    def __aiter__(self) -> Self: ...
    def __anext__(self) -> Coroutine[Any, Any, Leader]: ...
    def next(self, timeout: Optional[_Seconds] = None) -> Coroutine[Any, Any, Optional[Leader]]: ...
    @property
    def name(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __aenter__(self) -> Coroutine[Any, Any, Self]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> Coroutine[Any, Any, None]: ...

@final
class LockContext:
    """``Client.lock(...)``, ``Semaphore.permit(...)``, ``RwLock.read(...)`` and
    ``RwLock.write(...)``: acquires on entry, releases on exit."""

    def __enter__(self) -> Lock: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

@final
class AsyncLockContext:
    """``AsyncClient.lock(...)``, ``AsyncSemaphore.permit(...)``, ``AsyncRwLock.read(...)`` and
    ``AsyncRwLock.write(...)``: acquires on entry, releases on exit."""

    def __aenter__(self) -> Coroutine[Any, Any, AsyncLock]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> Coroutine[Any, Any, None]: ...

@final
class Semaphore:
    """A counting semaphore (``Client.semaphore``): at most ``permits`` holders at once.

    Each permit is a :class:`Lock` (renewed while held, with its lost signal and fencing
    token; ``lock.permit`` is its number). Every client of a semaphore must give the same
    ``permits`` while it is in use (``InvalidArgumentError`` otherwise).
    """

    @property
    def name(self) -> str: ...
    @property
    def permits(self) -> int: ...
    def acquire(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Lock:
        """Takes a permit, waiting up to ``wait`` seconds (``LockTimeoutError`` then)."""
    def try_acquire(
        self,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Optional[Lock]:
        """One attempt: a permit, or None when every permit is held."""
    def permit(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> LockContext:
        """``with sem.permit(ttl=, wait=) as lock:`` takes a permit and releases it on exit."""
    def holders(self) -> int:
        """How many permits are held now (on a majority of the nodes)."""

@final
class AsyncSemaphore:
    """A counting semaphore (``AsyncClient.semaphore``): the asyncio twin of :class:`Semaphore`."""

    @property
    def name(self) -> str: ...
    @property
    def permits(self) -> int: ...
    def acquire(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, AsyncLock]:
        """Coroutine: takes a permit, waiting up to ``wait`` seconds."""
    def try_acquire(
        self,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, Optional[AsyncLock]]:
        """Coroutine: one attempt; a permit, or None when every permit is held."""
    def permit(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> AsyncLockContext:
        """``async with sem.permit(ttl=, wait=) as lock:`` takes a permit, releases it on exit."""
    def holders(self) -> Coroutine[Any, Any, int]:
        """Coroutine: how many permits are held now."""

@final
class RwLock:
    """A read-write lock (``Client.rw_lock``): any number of readers at once, or one writer.

    Each grant is a :class:`Lock` of its own (renewed while held, with its lost signal and
    fencing token; ``resource`` is the read-write lock's name). A writer's token is larger than
    every earlier grant's; once a writer waits, readers that come later wait behind it.
    """

    @property
    def name(self) -> str: ...
    def acquire_read(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Lock:
        """Takes the lock for reading, beside other readers, waiting up to ``wait`` seconds
        (``LockTimeoutError`` then) while a writer holds it or waits ahead."""
    def acquire_write(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Lock:
        """Takes the lock for writing, alone, waiting up to ``wait`` seconds
        (``LockTimeoutError`` then) while anyone else holds it."""
    def try_read(
        self,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Optional[Lock]:
        """One attempt to read: a reader's lock, or None when a writer holds it or waits."""
    def try_write(
        self,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Optional[Lock]:
        """One attempt to write: the writer's lock, or None when anyone else holds it."""
    def read(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> LockContext:
        """``with rw.read(ttl=, wait=) as lock:`` reads, and releases on exit."""
    def write(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> LockContext:
        """``with rw.write(ttl=, wait=) as lock:`` writes, and releases on exit."""

@final
class AsyncRwLock:
    """A read-write lock (``AsyncClient.rw_lock``): the asyncio twin of :class:`RwLock`."""

    @property
    def name(self) -> str: ...
    def acquire_read(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, AsyncLock]:
        """Coroutine: takes the lock for reading, waiting up to ``wait`` seconds."""
    def acquire_write(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, AsyncLock]:
        """Coroutine: takes the lock for writing, waiting up to ``wait`` seconds."""
    def try_read(
        self,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, Optional[AsyncLock]]:
        """Coroutine: one attempt to read; a reader's lock, or None."""
    def try_write(
        self,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, Optional[AsyncLock]]:
        """Coroutine: one attempt to write; the writer's lock, or None."""
    def read(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> AsyncLockContext:
        """``async with rw.read(ttl=, wait=) as lock:`` reads, and releases on exit."""
    def write(
        self,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> AsyncLockContext:
        """``async with rw.write(ttl=, wait=) as lock:`` writes, and releases on exit."""

@final
class Client:
    """A lock client over one Redis node or N independent masters (Redlock)."""

    def __new__(
        cls,
        nodes: Union[str, Sequence[str]],
        **options: Unpack[ClientOptions],
    ) -> Self: ...
    def acquire(
        self,
        resource: str,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Lock: ...
    def try_acquire(
        self,
        resource: str,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Optional[Lock]: ...
    def lock(
        self,
        resource: str,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> LockContext: ...
    def campaign(
        self,
        name: str,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        value: Optional[_LeaderValue] = None,
    ) -> Leadership: ...
    def observe(self, name: str) -> Observation: ...
    def semaphore(self, name: str, permits: int) -> Semaphore:
        """The counting semaphore ``name`` with ``permits`` permits (1 to ``MAX_PERMITS``)."""
    def rw_lock(self, name: str) -> RwLock:
        """The read-write lock ``name``: many readers or one writer. No I/O."""
    def fenced_set(self, key: str, value: str, fence: _FenceArg) -> None: ...
    def fenced_get(self, key: str) -> Optional[tuple[str, int]]: ...
    def inspect(self, resource: str) -> list[dict[str, Any]]: ...
    def metrics(self) -> Metrics:
        """What this client counted since it was made, as a plain dict (no I/O)."""
    @property
    def nodes(self) -> list[str]: ...
    @property
    def quorum(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

@final
class AsyncClient:
    """The asyncio twin of :class:`Client`."""

    def __new__(
        cls,
        nodes: Union[str, Sequence[str]],
        **options: Unpack[ClientOptions],
    ) -> Self: ...
    @classmethod
    def connect(
        cls,
        nodes: Union[str, Sequence[str]],
        **options: Unpack[ClientOptions],
    ) -> Coroutine[Any, Any, AsyncClient]: ...
    def acquire(
        self,
        resource: str,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, AsyncLock]: ...
    def try_acquire(
        self,
        resource: str,
        ttl: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> Coroutine[Any, Any, Optional[AsyncLock]]: ...
    def lock(
        self,
        resource: str,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        **options: Unpack[LockOptions],
    ) -> AsyncLockContext: ...
    def campaign(
        self,
        name: str,
        ttl: Optional[_Seconds] = None,
        wait: Optional[_Seconds] = None,
        value: Optional[_LeaderValue] = None,
    ) -> Coroutine[Any, Any, AsyncLeadership]: ...
    def observe(self, name: str) -> AsyncObservation: ...
    def semaphore(self, name: str, permits: int) -> AsyncSemaphore:
        """The counting semaphore ``name`` with ``permits`` permits (1 to ``MAX_PERMITS``)."""
    def rw_lock(self, name: str) -> AsyncRwLock:
        """The read-write lock ``name``: many readers or one writer. No I/O."""
    def fenced_set(self, key: str, value: str, fence: _FenceArg) -> Coroutine[Any, Any, None]: ...
    def fenced_get(self, key: str) -> Coroutine[Any, Any, Optional[tuple[str, int]]]: ...
    def inspect(self, resource: str) -> Coroutine[Any, Any, list[dict[str, Any]]]: ...
    def metrics(self) -> Metrics:
        """What this client counted, as ``Client.metrics()`` (a dict at once: no I/O)."""
    @property
    def nodes(self) -> list[str]: ...
    @property
    def quorum(self) -> int: ...
    def close(self) -> None: ...
    def __aenter__(self) -> Coroutine[Any, Any, Self]: ...
    def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> Coroutine[Any, Any, bool]: ...
