"""Hot metric series kept as plain lists under their owner's lock, collected at each scrape.

A prometheus_client `Counter.inc` or `Histogram.observe` costs several Python calls (an
observability check, the value's own lock, a Python loop over the buckets), and a reconciled
object records about ten. A series here is a `Cell`, a list of floats its owner changes in
place while holding its own `threading.Lock` (`with lock:` and `bisect` are C: no Python call
on the hot path). A family is a registry collector that renders its cells at each scrape,
through prometheus_client's families for custom collectors, as the prometheus_client metric it
stands for would: the same family and sample names, label names and values, bucket bounds
(`le` as prometheus_client writes it), series in the order they were made, no `_created`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from itertools import accumulate

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

__all__ = ["Cell", "CellCounter", "CellFamily", "CellGauge", "CellHistogram"]

#: One series: `[value]` for a counter or a gauge; for a histogram, the count of each bucket
#: (not cumulative; index `bisect_left(family.bounds, seconds)`, the last is +Inf) then the
#: sum of the observations.
Cell = list[float]
Series = list[tuple[tuple[str, ...], Cell]]


class CellFamily:
    """One family of cells, registered in `registry` (as a prometheus_client metric is);
    a gauge, unless a subclass says otherwise."""

    kind = "gauge"
    family_type: type[GaugeMetricFamily] | type[CounterMetricFamily] = GaugeMetricFamily

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: tuple[str, ...],
        *,
        buckets: tuple[float, ...] = (),
        registry: CollectorRegistry,
    ) -> None:
        if bool(buckets) != (self.kind == "histogram"):
            raise ValueError(f"Metric {name}: buckets are for histograms, and histograms need them")
        self.name = name
        self.documentation = documentation
        self.labels = labels
        self.bounds = (*buckets, math.inf) if buckets and buckets[-1] != math.inf else buckets
        self._les = _bucket_labels(self.bounds) if buckets else []  # a histogram's `le`s
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], tuple[Cell, threading.Lock]] = {}
        registry.register(self)

    def cell(self, values: tuple[str, ...], lock: threading.Lock) -> Cell:
        """The series of these label values, made at zero the first time: change it only
        while holding `lock`, the lock it was first asked with (its owner's)."""
        if len(values) != len(self.labels):
            raise ValueError(f"{self.name} takes the labels {self.labels}, not {values!r}")
        with self._lock:
            cell, guard = self._series.setdefault(values, ([0.0] * (len(self.bounds) + 1), lock))
        if guard is not lock:
            raise ValueError(f"{self.name}{values!r} is already guarded by another lock")
        return cell

    def describe(self) -> list[Metric]:
        return [self._render([])]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            series = list(self._series.items())
        snapshot = []
        for values, (cell, lock) in series:
            with lock:
                snapshot.append((values, cell.copy()))
        yield self._render(snapshot)

    def _render(self, series: Series) -> Metric:
        family = self.family_type(self.name, self.documentation, labels=self.labels)
        for values, cell in series:
            family.add_metric(values, cell[0])
        return family


class CellGauge(CellFamily):
    """A gauge: one sample per series, named as the family."""


class CellCounter(CellFamily):
    """A counter: one `_total` sample per series (the family is named without it)."""

    kind = "counter"
    family_type = CounterMetricFamily


class CellHistogram(CellFamily):
    """Cumulative `_bucket{le}` samples, then `_count` and `_sum`, per series."""

    kind = "histogram"

    def _render(self, series: Series) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for values, cell in series:
            buckets = list(zip(self._les, accumulate(cell[:-1]), strict=True))
            family.add_metric(values, buckets, cell[-1])
        return family


def _bucket_labels(bounds: tuple[float, ...]) -> list[str]:
    """The `le` of each bound as prometheus_client writes it, read off a histogram of its own."""
    probe = Histogram("probe", "The le labels", buckets=bounds, registry=None)
    samples = [sample for family in probe.collect() for sample in family.samples]
    les = [sample.labels["le"] for sample in samples if sample.name == "probe_bucket"]
    if len(les) != len(bounds):
        raise ValueError(f"Buckets {bounds} are not as prometheus_client keeps them: {les}")
    return les
