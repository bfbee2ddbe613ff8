"""Hot metric series kept as plain lists under their owner's lock, collected at each scrape.

A prometheus_client `Counter.inc` or `Histogram.observe` costs several Python calls (an
observability check, the value's own lock, a Python loop over the buckets), and a reconciled
object records about ten. A series here is a `Cell`, a list of floats its owner changes in
place while holding its own `threading.Lock` (`with lock:` and `bisect` are C: no Python call
on the hot path). A family is a registry collector that renders its cells as the
prometheus_client collector it stands for would: the same family and sample names, label
names and values, bucket bounds, series in the order they were made, no `_created` sample.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["Cell", "CellCounter", "CellFamily", "CellGauge", "CellHistogram"]

# How prometheus_client writes a bucket bound as its `le` label (untyped there).
_go_float: Callable[[float], str] = floatToGoString

#: One series: `[value]` for a counter or a gauge; for a histogram, the count of each bucket
#: (not cumulative; index `bisect_left(family.bounds, seconds)`, the last is +Inf) then the
#: sum of the observations.
Cell = list[float]


class CellFamily:
    """One family of cells, registered in `registry` (as a prometheus_client metric is)."""

    kind = "gauge"

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
        self.name = name.removesuffix("_total") if self.kind == "counter" else name
        self.documentation = documentation
        self.labels = labels
        self.bounds = (*buckets, math.inf) if buckets else ()
        self._les = [_go_float(bound) for bound in self.bounds]
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
        return [Metric(self.name, self.documentation, self.kind)]

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, self.kind)
        with self._lock:
            series = list(self._series.items())
        for values, (cell, lock) in series:
            with lock:
                snapshot = cell.copy()
            family.samples += self._samples(dict(zip(self.labels, values, strict=True)), snapshot)
        yield family

    def _samples(self, labels: dict[str, str], cell: Cell) -> list[Sample]:
        return [Sample(self.name, labels, cell[0])]


class CellGauge(CellFamily):
    """A gauge: one sample per series, named as the family."""


class CellCounter(CellFamily):
    """A counter: the family named without `_total`, its samples with it (as prometheus_client)."""

    kind = "counter"

    def _samples(self, labels: dict[str, str], cell: Cell) -> list[Sample]:
        return [Sample(self.name + "_total", labels, cell[0])]


class CellHistogram(CellFamily):
    """Cumulative `_bucket{le}` samples, then `_count` and `_sum`, per series."""

    kind = "histogram"

    def _samples(self, labels: dict[str, str], cell: Cell) -> list[Sample]:
        samples, total = [], 0.0
        for le, count in zip(self._les, cell[:-1], strict=True):
            total += count
            samples.append(Sample(self.name + "_bucket", {**labels, "le": le}, total))
        samples.append(Sample(self.name + "_count", labels, total))
        samples.append(Sample(self.name + "_sum", dict(labels), cell[-1]))
        return samples
