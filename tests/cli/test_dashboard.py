"""`python app.py dashboard`: a valid Grafana dashboard over metrics the framework exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cloudcoil_sync.application._internal.cli import build_cli
from cloudcoil_sync.application._internal.dashboard import dashboard
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics

from .settings_app import app as settings

HERE = Path(__file__).parent
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")
FUNCTIONS = {"sum", "rate", "max", "min", "histogram_quantile", "by", "le"}


def exported() -> set[str]:
    """Every series name the framework's registry can expose."""
    names = set()
    for family in OperatorMetrics().registry.collect():
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def test_the_command_prints_a_dashboard_json(tmp_path: Path) -> None:
    printed = subprocess.run(
        [sys.executable, str(HERE / "settings_app.py"), "dashboard"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(printed.stdout) == dashboard("settings")
    target = tmp_path / "board.json"
    result = CliRunner().invoke(build_cli(settings), ["dashboard", "--output", str(target)])
    assert (
        result.exit_code == 0
        and json.loads(target.read_text())["title"] == "settings (cloudcoil_sync)"
    )
    failed = CliRunner().invoke(
        build_cli(settings), ["dashboard", "-o", str(tmp_path / "no" / "x")]
    )
    assert failed.exit_code == 1 and "cannot write" in failed.output


def test_the_dashboard_is_well_formed() -> None:
    board = dashboard("settings")
    assert board["schemaVersion"] >= 36 and board["uid"] == "cloudcoil-settings"
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "controller"]
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        for row in range(grid["y"], grid["y"] + grid["h"]):
            for column in range(grid["x"], grid["x"] + grid["w"]):
                assert (row, column) not in cells, f"{panel['title']} overlaps another panel"
                cells.add((row, column))
        if panel["type"] == "row":
            continue
        assert panel["type"] == "timeseries" and panel["targets"]
        assert [t["refId"] for t in panel["targets"]] == [
            chr(ord("A") + i) for i in range(len(panel["targets"]))
        ]


def test_every_query_uses_metrics_the_framework_exports() -> None:
    names = exported()
    used: set[str] = set()
    for panel in dashboard("settings")["panels"]:
        for target in panel.get("targets", []):
            expr: str = target["expr"]
            assert expr.count("(") == expr.count(")"), expr
            metrics = set(SELECTOR.findall(expr)) - FUNCTIONS
            assert metrics, f"no metric selector in {expr}"
            assert metrics <= names, f"{expr} uses {metrics - names}"
            used |= metrics
    assert "cloudcoil_reconcile_causes_total" in used
    assert "controller_runtime_reconcile_total" in used


def test_a_dashboard_for_any_operator_name() -> None:
    board: dict[str, Any] = dashboard("a" * 60)
    assert len(board["uid"]) <= 40


def test_every_framework_metric_is_listed_in_the_docs() -> None:
    docs = (HERE.parent.parent / "docs" / "observability.md").read_text()
    families = {family.name for family in OperatorMetrics().registry.collect()}
    missing = [name for name in families if f"`{name}" not in docs]
    assert missing == []
