"""fencelock's metrics for Prometheus, through ``prometheus_client``.

``prometheus_client`` is an optional dependency: ``pip install 'fencelock[prometheus]'``
(``import fencelock`` never needs it; importing this module does).

:class:`Collector` reads ``client.metrics()`` at each scrape and reports it under the
names of ``fencelock.METRIC_NAMES``: the counters ``fencelock_acquired_total``,
``fencelock_failed_total`` (label ``kind``), ``fencelock_lost_total`` (label
``reason``), ``fencelock_released_total``, ``fencelock_renewals_total`` and
``fencelock_renewal_failures_total``, the gauges ``fencelock_held`` and
``fencelock_waiting``, and the histogram ``fencelock_acquire_latency_seconds``
(buckets ``fencelock.LATENCY_BUCKETS``)::

    from prometheus_client import REGISTRY, start_http_server
    from fencelock.prometheus import Collector

    REGISTRY.register(Collector(client))
    start_http_server(9100)

Several clients in one registry: one collector, each client with its own label
values (the same label names for all)::

    collector = Collector(orders, labels={"pool": "orders"})
    collector.add(billing, labels={"pool": "billing"})
    REGISTRY.register(collector)
"""

from __future__ import annotations

from typing import Iterator, List, Mapping, Optional, Sequence, Tuple, Union

try:
    from prometheus_client.metrics_core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector as _PrometheusCollector
    from prometheus_client.utils import floatToGoString
except ImportError:  # the original error stays as its context
    raise ImportError(
        "fencelock.prometheus needs the prometheus_client package: "
        "pip install 'fencelock[prometheus]' (or pip install prometheus-client)"
    )

from ._metrics import Metrics
from ._native import METRIC_NAMES, AsyncClient, Client

__all__ = ["Collector"]

_HELP = {
    "acquired": "Acquire calls that returned a lock, a permit or a read or write grant.",
    "failed": "Acquire calls that failed, by error kind.",
    "lost": "Held locks lost, by reason.",
    "released": "Releases that succeeded.",
    "renewals": "Automatic renewals that succeeded.",
    "renewal_failures": "Automatic renewals that failed (retried until the lock is lost).",
    "held": "Locks, permits and grants held now.",
    "waiting": "Acquire calls waiting for a lock now.",
    "acquire_latency": "How long acquire calls took, successful or not.",
}
# The labels of the per-kind and per-reason counters, and the histogram's own.
_RESERVED = frozenset({"kind", "reason", "le"})


class Collector(_PrometheusCollector):
    """A ``prometheus_client`` collector of one or more fencelock clients (sync or
    asyncio): register it in a ``CollectorRegistry`` (``REGISTRY.register(...)``) and
    every scrape reads each client's ``metrics()`` (no I/O, no lock on Redis).

    ``labels`` are constant labels on every series of ``client`` (for example
    ``{"pool": "orders"}``); they may not be named ``kind``, ``reason`` or ``le``.
    """

    def __init__(
        self,
        client: Union[Client, AsyncClient],
        *,
        labels: Optional[Mapping[str, str]] = None,
    ) -> None:
        self._label_names: Tuple[str, ...] = tuple(labels or ())
        self._sources: List[Tuple[Union[Client, AsyncClient], Tuple[str, ...]]] = []
        self.add(client, labels=labels)

    def add(
        self,
        client: Union[Client, AsyncClient],
        *,
        labels: Optional[Mapping[str, str]] = None,
    ) -> None:
        """Reports ``client`` too, under ``labels``: the same label names as the
        clients before it, with other values. Raises ``ValueError`` otherwise."""
        if not isinstance(client, (Client, AsyncClient)):
            raise TypeError(
                f"client must be a fencelock Client or AsyncClient, not {type(client).__name__}"
            )
        labels = dict(labels or {})
        for name, value in labels.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError(f"labels must map str to str, got {name!r}: {value!r}")
        reserved = sorted(_RESERVED & labels.keys())
        if reserved:
            raise ValueError(f"label names {reserved} are fencelock's own")
        if set(labels) != set(self._label_names):
            raise ValueError(
                f"every client of a Collector needs the labels {list(self._label_names)}, "
                f"got {list(labels)}"
            )
        values = tuple(labels[name] for name in self._label_names)
        if any(existing == values for _, existing in self._sources):
            raise ValueError(f"a client with the labels {labels} is collected already")
        self._sources.append((client, values))

    def collect(self) -> Iterator[Metric]:
        """The families of the clients' current snapshots (what a scrape calls)."""
        return iter(
            self._families([(client.metrics(), values) for client, values in self._sources])
        )

    def describe(self) -> Iterator[Metric]:
        """The families without samples: how a registry learns the names this
        collector reports (and refuses a second collector of the same names)."""
        return iter(self._families([]))

    def _families(self, snapshots: Sequence[Tuple[Metrics, Tuple[str, ...]]]) -> List[Metric]:
        """The families, in the order of the snapshot's keys, with a sample per
        snapshot (under its label values)."""
        names = list(self._label_names)

        def counter(key: str, *extra: str) -> CounterMetricFamily:
            return CounterMetricFamily(METRIC_NAMES[key], _HELP[key], labels=[*names, *extra])

        def gauge(key: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(METRIC_NAMES[key], _HELP[key], labels=names)

        acquired, failed, lost = (
            counter("acquired"),
            counter("failed", "kind"),
            counter("lost", "reason"),
        )
        released, renewals = counter("released"), counter("renewals")
        renewal_failures = counter("renewal_failures")
        held, waiting = gauge("held"), gauge("waiting")
        latency = HistogramMetricFamily(
            METRIC_NAMES["acquire_latency"], _HELP["acquire_latency"], labels=names, unit="seconds"
        )
        for snapshot, label_values in snapshots:
            values = list(label_values)
            acquired.add_metric(values, snapshot["acquired"])
            for kind, count in snapshot["failed"].items():
                failed.add_metric([*values, kind], count)
            for reason, count in snapshot["lost"].items():
                lost.add_metric([*values, reason], count)
            released.add_metric(values, snapshot["released"])
            renewals.add_metric(values, snapshot["renewals"])
            renewal_failures.add_metric(values, snapshot["renewal_failures"])
            held.add_metric(values, snapshot["held"])
            waiting.add_metric(values, snapshot["waiting"])
            timed = snapshot["acquire_latency"]
            buckets = [(floatToGoString(bound), float(n)) for bound, n in timed["buckets"]]
            buckets.append(("+Inf", float(timed["count"])))
            latency.add_metric(values, buckets, timed["sum"])
        return [
            acquired,
            failed,
            lost,
            released,
            renewals,
            renewal_failures,
            held,
            waiting,
            latency,
        ]
