"""Cell families: misuse is refused by name, and they claim their names in the registry."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry, Counter

from cloudcoil_sync.controller._internal.metric_cells import (
    CellCounter,
    CellGauge,
    CellHistogram,
)


def test_a_series_takes_the_familys_labels_and_keeps_its_first_lock() -> None:
    family = CellCounter("jobs_total", "Jobs", ("queue",), registry=CollectorRegistry())
    lock = threading.Lock()
    cell = family.cell(("a",), lock)
    assert family.cell(("a",), lock) is cell
    with pytest.raises(
        ValueError, match=r"jobs_total takes the labels \('queue',\), not \('a', 'b'\)"
    ):
        family.cell(("a", "b"), lock)
    with pytest.raises(ValueError, match=r"jobs_total\('a',\) is already guarded by another lock"):
        family.cell(("a",), threading.Lock())


def test_buckets_are_for_histograms_only() -> None:
    registry = CollectorRegistry()
    with pytest.raises(ValueError, match="Metric wait_seconds: buckets are for histograms"):
        CellHistogram("wait_seconds", "Wait", (), registry=registry)
    with pytest.raises(ValueError, match="Metric jobs_total: buckets are for histograms"):
        CellCounter("jobs_total", "Jobs", (), buckets=(1.0,), registry=registry)


def test_a_prometheus_client_metric_of_a_cell_familys_name_is_refused() -> None:
    registry = CollectorRegistry(auto_describe=True)
    CellCounter("jobs_total", "Jobs", (), registry=registry)
    CellHistogram("wait_seconds", "Wait", (), buckets=(1.0,), registry=registry)
    CellGauge("busy", "Busy", (), registry=registry)
    for name in ("jobs", "jobs_total", "wait_seconds_bucket", "wait_seconds_sum", "busy"):
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            Counter(name, "clash", registry=registry)


def test_a_scrape_reads_the_cells_as_they_are() -> None:
    registry = CollectorRegistry()
    lock = threading.Lock()
    histogram = CellHistogram("wait_seconds", "Wait", ("q",), buckets=(0.5, 1.0), registry=registry)
    cell = histogram.cell(("a",), lock)
    cell[0] += 1  # 0.5 or less
    cell[2] += 2  # above 1.0
    cell[-1] += 7.25
    busy = CellGauge("busy", "Busy", ("q",), registry=registry).cell(("a",), lock)
    busy[0] -= 1
    get = registry.get_sample_value
    assert get("wait_seconds_bucket", {"q": "a", "le": "0.5"}) == 1
    assert get("wait_seconds_bucket", {"q": "a", "le": "1.0"}) == 1
    assert get("wait_seconds_bucket", {"q": "a", "le": "+Inf"}) == 3
    assert get("wait_seconds_count", {"q": "a"}) == 3
    assert get("wait_seconds_sum", {"q": "a"}) == 7.25
    assert get("busy", {"q": "a"}) == -1
