"""``dashboard``: a Grafana dashboard (JSON) over the metrics the framework exports.

Import it into Grafana (Dashboards → New → Import) and pick the Prometheus data source that
scrapes the operator. Rows: reconciles (rate by result, errors, duration, causes), the work
queue (depth, adds, retries, wait and work time, stuck workers), health (controllers ready,
leadership, fenced passes, rejected objects) and admission (requests by code, latency, in
flight). Every query uses a metric `OperatorMetrics` exports (a test checks it); the
`controller` variable narrows the controller panels.
"""

from __future__ import annotations

import json
from typing import Any

import click

from cloudcoil_sync.application._internal.cli import Operator

__all__ = ["PANELS", "command", "dashboard"]

C = '{controller=~"$controller"}'
Q = '{name=~"$controller"}'
W = "[$__rate_interval]"


def _quantile(q: float, metric: str, by: str = "controller") -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{C}{W})))"


#: (row, title, unit, [(expr, legend)]): one time series panel each.
PANELS: tuple[tuple[str, str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Reconciles", "Reconciles per second by result", "ops", (
        (f"sum by (controller, result) (rate(controller_runtime_reconcile_total{C}{W}))",
         "{{controller}} {{result}}"),)),
    ("Reconciles", "Reconcile errors per second", "ops", (
        (f"sum by (controller) (rate(controller_runtime_reconcile_errors_total{C}{W}))",
         "{{controller}} errors"),
        (f"sum by (controller) (rate(controller_runtime_terminal_reconcile_errors_total{C}{W}))",
         "{{controller}} terminal"),
        (f"sum by (controller) (rate(controller_runtime_reconcile_timeouts_total{C}{W}))",
         "{{controller}} timed out"))),
    ("Reconciles", "Reconcile duration", "s", (
        (_quantile(0.5, "controller_runtime_reconcile_time_seconds"), "{{controller}} p50"),
        (_quantile(0.99, "controller_runtime_reconcile_time_seconds"), "{{controller}} p99"))),
    ("Reconciles", "Why passes ran (causes per second)", "ops", (
        (f"sum by (controller, cause) (rate(cloudcoil_reconcile_causes_total{C}{W}))",
         "{{controller}} {{cause}}"),)),
    ("Reconciles", "Workers busy", "short", (
        (f"sum by (controller) (controller_runtime_active_workers{C})", "{{controller}} active"),
        (f"sum by (controller) (controller_runtime_max_concurrent_reconciles{C})",
         "{{controller}} max"))),
    ("Work queue", "Queue depth and delayed keys", "short", (
        (f"sum by (name) (workqueue_depth{Q})", "{{name}} depth"),
        (f"sum by (controller) (cloudcoil_controller_delayed_keys{C})", "{{controller}} delayed"))),
    ("Work queue", "Adds and retries per second", "ops", (
        (f"sum by (name) (rate(workqueue_adds_total{Q}{W}))", "{{name}} adds"),
        (f"sum by (name) (rate(workqueue_retries_total{Q}{W}))", "{{name}} retries"))),
    ("Work queue", "Queue wait and work time (p99)", "s", (
        (f"histogram_quantile(0.99, sum by (le, name) "
         f"(rate(workqueue_queue_duration_seconds_bucket{Q}{W})))", "{{name}} waiting"),
        (f"histogram_quantile(0.99, sum by (le, name) "
         f"(rate(workqueue_work_duration_seconds_bucket{Q}{W})))", "{{name}} working"))),
    ("Work queue", "Stuck work", "s", (
        (f"max by (name) (workqueue_longest_running_processor_seconds{Q})", "{{name}} longest"),
        (f"sum by (name) (workqueue_unfinished_work_seconds{Q})", "{{name}} unfinished"))),
    ("Health", "Controllers ready, manager ready, leader", "short", (
        (f"min by (controller) (cloudcoil_controller_ready{C})", "{{controller}} ready"),
        ("min(cloudcoil_manager_ready{})", "manager ready"),
        ("max by (name) (leader_election_master_status{})", "leader {{name}}"))),
    ("Health", "Fenced passes, rejected objects, mapper errors", "ops", (
        (f"sum by (controller, cause) (rate(cloudcoil_fenced_passes_total{C}{W}))",
         "{{controller}} fenced {{cause}}"),
        (f"sum by (controller, source) (rate(cloudcoil_invalid_objects_total{C}{W}))",
         "{{controller}} invalid ({{source}})"),
        (f"sum by (controller) (rate(cloudcoil_mapper_errors_total{C}{W}))",
         "{{controller}} mapper errors"))),
    ("Admission", "Webhook requests per second by code", "reqps", (
        (f"sum by (webhook, code) (rate(controller_runtime_webhook_requests_total{{}}{W}))",
         "{{webhook}} {{code}}"),)),
    ("Admission", "Webhook latency and requests in flight", "s", (
        ("histogram_quantile(0.99, sum by (le, webhook) "
         f"(rate(controller_runtime_webhook_latency_seconds_bucket{{}}{W})))", "{{webhook}} p99"),
        ("sum by (webhook) (controller_runtime_webhook_requests_in_flight{})",
         "{{webhook}} in flight"))),
)  # fmt: skip


def _panel(ident: int, x: int, y: int, title: str, unit: str, queries: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + index), "expr": expr, "legendFormat": legend}
            for index, (expr, legend) in enumerate(queries)
        ],
    }


def dashboard(name: str) -> dict[str, Any]:
    """The dashboard of operator `name` (Grafana schema version 39)."""
    panels: list[dict[str, Any]] = []
    row, y, x, ident = None, 0, 0, 1
    for section, title, unit, queries in PANELS:
        if section != row:
            y += 8 if x else 0
            panels.append(
                {"id": ident, "type": "row", "title": section, "collapsed": False,
                 "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []}
            )  # fmt: skip
            row, x, y, ident = section, 0, y + 1, ident + 1
        panels.append(_panel(ident, x, y, title, unit, queries))
        ident += 1
        x, y = (12, y) if x == 0 else (0, y + 8)
    variables = [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
        {
            "name": "controller",
            "type": "query",
            "label": "Controller",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": "label_values(controller_runtime_reconcile_total, controller)",
            "refresh": 2,
            "includeAll": True,
            "multi": True,
            "allValue": ".*",
            "current": {"text": "All", "value": "$__all"},
        },
    ]
    return {
        "title": f"{name} (cloudcoil_sync)",
        "uid": f"cloudcoil-{name}"[:40],
        "tags": ["cloudcoil_sync", "operator"],
        "schemaVersion": 39,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": variables},
        "panels": panels,
    }


def command(app: Operator) -> click.Command:
    """``dashboard [--output FILE]``."""

    @click.command(
        "dashboard", help="Print a Grafana dashboard (JSON) over this operator's metrics."
    )
    @click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write it to FILE.")
    def show(output: str | None) -> None:
        text = json.dumps(dashboard(app.name), indent=2) + "\n"
        if output is None:
            click.echo(text, nl=False)
            return
        try:
            with open(output, "w", encoding="utf-8") as stream:
                stream.write(text)
        except OSError as error:
            raise click.ClickException(f"cannot write {output}: {error.strerror}") from None

    return show
