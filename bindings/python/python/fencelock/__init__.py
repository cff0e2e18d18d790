"""fencelock: distributed locks over Redis, on a Rust core.

Single-node locks and Redlock over several independent masters, automatic
renewal with a lost-lock signal, and fencing tokens that stay strictly
increasing per resource. Sync (:class:`Client`) and asyncio
(:class:`AsyncClient`) APIs; durations are seconds (floats).

>>> from fencelock import Client
>>> client = Client(["redis://127.0.0.1:6379"])          # doctest: +SKIP
>>> with client.lock("reports:nightly", ttl=30, wait=5) as lock:  # doctest: +SKIP
...     client.fenced_set("report:state", "running", lock.fence)

Leader election: ``client.campaign(name, ttl=, value=)`` waits until elected and
returns a :class:`Leadership` (``epoch``, ``lost``, ``resign()``, ``with``);
``client.observe(name)`` iterates over each new :class:`Leader`.

Counting semaphores: ``client.semaphore(name, permits)`` returns a :class:`Semaphore`
admitting at most ``permits`` holders at once; ``with sem.permit(ttl=, wait=) as lock:``
holds one (a :class:`Lock`, ``lock.permit`` its number), ``sem.holders()`` counts them.

Read-write locks: ``client.rw_lock(name)`` returns a :class:`RwLock` held by any number of
readers or by one writer; ``with rw.read(ttl=, wait=) as lock:`` and
``with rw.write(ttl=, wait=) as lock:`` hold it (each grant a :class:`Lock`).

Metrics: ``client.metrics()`` returns what the client counted as a plain dict
(:class:`Metrics`: acquisitions, failures by kind, losses by reason, releases,
renewals, the locks held and the calls waiting, an acquire-latency histogram);
``fencelock.prometheus.Collector`` exports it through ``prometheus_client``
(``pip install 'fencelock[prometheus]'``), under the names of :data:`METRIC_NAMES`.

Logging: the core's events (a lock acquired, a renewal failed, a lock lost, a node
unreachable…) go to the logger ``fencelock`` (a child per core module, such as
``fencelock.lock_state``), as ``lock lost resource=jobs reason=…`` with the fields
in ``record.fencelock_fields``; trace events at level :data:`TRACE` (5). The level
forwarded follows the ``fencelock`` logger's, read when a client is made: configure
logging first, or call :func:`sync_log_level` after changing it.

Forking: a client made before ``fork()`` raises :class:`ClosedError` in
the child. Create clients after forking (in each multiprocessing worker, or in
gunicorn's ``post_fork`` hook), or use the ``spawn`` start method.
"""

import atexit

from . import _logging
from ._errors import (
    AuthError,
    Closed,
    ClosedError,
    ConfigError,
    FenceLockError,
    InternalError,
    InvalidArgument,
    InvalidArgumentError,
    LockLost,
    LockLostError,
    LockTimeout,
    LockTimeoutError,
    NodeReport,
    NotAcquired,
    NotAcquiredError,
    NotHeld,
    NotHeldError,
    StaleToken,
    StaleTokenError,
    TlsError,
    Unavailable,
    UnavailableError,
    WouldBlock,
    WouldBlockError,
)
from ._errors import (
    CancelledError as CancelledError,
)
from ._logging import LOG_LEVELS, TRACE, sync_log_level
from ._metrics import AcquireLatency, Metrics
from ._native import (
    LATENCY_BUCKETS,
    MAX_DRIFT_FACTOR,
    MAX_FENCING_TOKEN,
    MAX_HOLDER_ID,
    MAX_LEADER_VALUE,
    MAX_PERMITS,
    MAX_PREFIX_LEN,
    MAX_RESOURCE_LEN,
    MAX_TTL,
    MAX_WAIT,
    METRIC_NAMES,
    MIN_TTL,
    AsyncClient,
    AsyncLeadership,
    AsyncLock,
    AsyncLockContext,
    AsyncObservation,
    AsyncRwLock,
    AsyncSemaphore,
    Client,
    Fence,
    Leader,
    Leadership,
    Lock,
    LockContext,
    LostSignal,
    Observation,
    RwLock,
    Semaphore,
    __version__,
    settle,
)

# The core's events to logging, from now on (its atexit hook goes before settle's).
_logging._install()

# Clean-up still on its way when the interpreter exits (a lock granted just
# as Ctrl-C came, the undo of an abandoned attempt) would die with the
# process and leave keys blocking their resources until their ttl.
atexit.register(settle)

__all__ = [
    "AcquireLatency",
    "AsyncClient",
    "AsyncLeadership",
    "AsyncLock",
    "AsyncLockContext",
    "AsyncObservation",
    "AsyncRwLock",
    "AsyncSemaphore",
    "AuthError",
    "Client",
    "ClosedError",
    "ConfigError",
    "Fence",
    "FenceLockError",
    # Not CancelledError (public all the same): `from fencelock import *`
    # would shadow asyncio.CancelledError, which a cancelled task raises.
    "InternalError",
    "InvalidArgumentError",
    "LATENCY_BUCKETS",
    "LOG_LEVELS",
    "Lock",
    "Leader",
    "Leadership",
    "LockContext",
    "LockLostError",
    "LockTimeoutError",
    "LostSignal",
    "MAX_DRIFT_FACTOR",
    "MAX_FENCING_TOKEN",
    "MAX_HOLDER_ID",
    "MAX_LEADER_VALUE",
    "MAX_PERMITS",
    "MAX_PREFIX_LEN",
    "MAX_RESOURCE_LEN",
    "MAX_TTL",
    "MAX_WAIT",
    "METRIC_NAMES",
    "MIN_TTL",
    "Metrics",
    "NodeReport",
    "NotAcquiredError",
    "NotHeldError",
    "Observation",
    "RwLock",
    "Semaphore",
    "StaleTokenError",
    "TRACE",
    "TlsError",
    "UnavailableError",
    "WouldBlockError",
    "__version__",
    "settle",
    "sync_log_level",
    # Names of version 0.1, aliases of the *Error classes:
    "Closed",
    "InvalidArgument",
    "LockLost",
    "LockTimeout",
    "NotAcquired",
    "NotHeld",
    "StaleToken",
    "Unavailable",
    "WouldBlock",
]
