"""Existing-resource aggregation: summarise Deployments the operator neither owns nor changes.

A ``WorkloadSummary`` selects Deployments by label; its status counts them and their available
replicas. The Deployments are only watched (read-only RBAC: get/list/watch); every change maps
to the summaries of that namespace and the reconciler aggregates from the cache.
``summary()`` builds the controller as a reusable group.

    python examples/patterns/workload_summary.py manifests
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, Controller, ReconcileStatus, ResourceKey
from cloudcoil_sync.crd import PrinterColumn, custom_resource

__all__ = ["WorkloadSummary", "app", "summary"]


class SummarySpec(BaseModel):
    selector: str = Field(description="A label selector, e.g. team=payments")


class SummaryStatus(ReconcileStatus):
    deployments: Annotated[int, PrinterColumn("Deployments")] = 0
    available_replicas: int = Field(default=0, alias="availableReplicas")
    names: list[str] = Field(default_factory=list)


@custom_resource(api_version="patterns.cloudcoil.dev/v1", plural="workloadsummaries")
class WorkloadSummary(Resource):
    api_version: Literal["patterns.cloudcoil.dev/v1"] = Field(
        default="patterns.cloudcoil.dev/v1", alias="apiVersion"
    )
    kind: Literal["WorkloadSummary"] = "WorkloadSummary"
    spec: SummarySpec
    status: SummaryStatus | None = None


def summary() -> Controller[WorkloadSummary]:
    summaries = Controller(WorkloadSummary)

    @summaries.watch(Deployment)
    def summaries_of(deployment: Deployment) -> Iterator[ResourceKey]:
        namespace = deployment.metadata.namespace if deployment.metadata else None
        for item in summaries.cached(WorkloadSummary).list(namespace=namespace):
            yield ResourceKey(item.name or "", namespace)

    @summaries.reconcile()
    def aggregate(item: WorkloadSummary, ctx: Context[WorkloadSummary]) -> None:
        selected = ctx.cached(Deployment).list(label_selector=item.spec.selector)
        available = sum((d.status.available_replicas or 0) if d.status else 0 for d in selected)
        ctx.set_status(
            deployments=len(selected),
            available_replicas=available,
            names=sorted(d.name or "" for d in selected),
        )

    return summaries


app = Application("summaries")
app.include(summary())

if __name__ == "__main__":
    app.main()
