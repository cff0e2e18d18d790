"""The shape of ``Client.metrics()`` and ``AsyncClient.metrics()``: plain dicts,
typed here for annotations (``m: fencelock.Metrics = client.metrics()``)."""

from typing import Dict, List, Optional, Tuple, TypedDict


class AcquireLatency(TypedDict):
    """How long acquire calls took (successful or not), in seconds."""

    count: int
    """How many acquire calls were timed."""
    sum: float
    """Their total duration, in seconds."""
    buckets: List[Tuple[float, int]]
    """``(upper bound in seconds, how many took at most that long)`` for each of
    ``LATENCY_BUCKETS``: cumulative counts, as Prometheus counts them; the rest
    (``count`` minus the last) took longer than the last bound."""
    p50: Optional[float]
    """The median estimated from the buckets (the upper bound of the bucket it falls
    in), in seconds; None with nothing timed or past the last bucket."""
    p99: Optional[float]
    """The 99th percentile, estimated as ``p50`` is."""


class Metrics(TypedDict):
    """What a client counted since it was made (``client.metrics()``). Counters only
    grow; ``held`` and ``waiting`` are gauges (the value now)."""

    acquired: int
    """Acquire calls that returned a lock, a permit or a read or write grant."""
    failed: Dict[str, int]
    """Acquire calls that failed, per error kind (``FenceLockError.kind``: every kind,
    zeros included). A refused ``try_acquire`` counts as ``not_acquired``, a wait
    given up by its caller (Ctrl-C, a cancelled task) as ``cancelled``."""
    lost: Dict[str, int]
    """Held locks lost, per reason (``lock.lost.reason``: every reason, zeros included)."""
    released: int
    """Releases that succeeded (a release that finds the lock lost does not count)."""
    renewals: int
    """Automatic renewals that succeeded."""
    renewal_failures: int
    """Automatic renewals that failed (retried until the lock is lost)."""
    held: int
    """Locks, permits and grants held now."""
    waiting: int
    """Acquire calls waiting for a lock to be free now."""
    acquire_latency: AcquireLatency
    """How long acquire calls took."""
