"""The Widget operator: a custom resource, four ordered stages, three child kinds, admission.

A ``Widget`` (``examples.cloudcoil.dev/v1alpha1``) asks for a small web workload that serves
``spec.message``. The operator converges it in four ordered stages, each reported as a
condition on the Widget's status (``Ready`` summarises them):

1. ``ConfigurationReady``: a ConfigMap ``<widget>-config`` holds the message;
2. ``DeploymentApplied``: a Deployment ``<widget>`` runs ``spec.replicas`` Pods reading it;
3. ``ServiceReady``: a Service ``<widget>`` selects those Pods;
4. ``WorkloadAvailable``: waits (``Wait``) while the Deployment rolls out.

Admission, scoped to Widgets: a mutating webhook adds default labels, and a validating webhook
reads an optional ``widget-policy`` ConfigMap live (``request.client``) to bound replicas and
forbid words in the message. Reading that ConfigMap is the one API call the framework cannot
infer, so it is declared with an ``RBACRule``.

::

    python examples/widget_operator.py manifests --image example/widgets:v1 --ca-file ca.crt
    python examples/widget_operator.py install --image example/widgets:v1 --ca-file ca.crt
    python examples/widget_operator.py run
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Service
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.admission import AdmissionDenied, AdmissionRequest
from cloudcoil_sync.application import Application, RBACRule, WebhookServer
from cloudcoil_sync.client import NotFound
from cloudcoil_sync.controller import Context, ReconcileStatus, Wait
from cloudcoil_sync.crd import CEL, PrinterColumn, custom_resource

__all__ = ["POLICY", "Widget", "WidgetSpec", "WidgetStatus", "app", "widgets"]

POLICY = "widget-policy"
IMAGE = "registry.k8s.io/e2e-test-images/agnhost:2.53"
MANAGED_BY = "app.kubernetes.io/managed-by"


class WidgetSpec(BaseModel):
    message: str = "Hello from cloudcoil"
    replicas: Annotated[int, CEL("self >= 0 && self <= 10", "replicas must be 0..10")] = 1


class WidgetStatus(ReconcileStatus):
    phase: Annotated[str | None, PrinterColumn("Phase")] = None
    available_replicas: int | None = Field(default=None, alias="availableReplicas")


@custom_resource(
    api_version="examples.cloudcoil.dev/v1alpha1", plural="widgets", short_names=("wd",)
)
class Widget(Resource):
    # The decorator sets these two; declaring them too lets type checkers see the defaults.
    api_version: Literal["examples.cloudcoil.dev/v1alpha1"] = Field(
        default="examples.cloudcoil.dev/v1alpha1", alias="apiVersion"
    )
    kind: Literal["Widget"] = "Widget"
    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: WidgetStatus | None = None


app = Application(
    "widgets",
    rules=(RBACRule(ConfigMap, ("get",), resource_names=(POLICY,)),),
    webhook=WebhookServer(tls_secret="widgets-tls"),
    leader_election=True,
)
widgets = app.controller(Widget, owns=(ConfigMap, Deployment, Service))


def _labels(widget: Widget) -> dict[str, str]:
    return {"app.kubernetes.io/name": "widget", "app.kubernetes.io/instance": widget.name or ""}


# -- admission --------------------------------------------------------------------------------


@widgets.mutate()
def default_labels(request: AdmissionRequest[Widget]) -> Widget | None:
    """Every Widget carries the operator's labels (existing values are kept)."""
    widget = request.resource
    if widget is None or widget.metadata is None:
        return None
    widget.metadata.labels = {
        MANAGED_BY: "widgets",
        "tier": "web",
        **(widget.metadata.labels or {}),
    }
    return widget


@widgets.validate()
def validate_message(request: AdmissionRequest[Widget]) -> None:
    """Apply the optional ``widget-policy`` ConfigMap (``maxReplicas``, ``forbiddenWords``)."""
    widget = request.resource
    if widget is None:
        return
    if not widget.spec.message.strip():
        raise AdmissionDenied("spec.message must not be blank")
    try:
        policy = request.client(ConfigMap).get(POLICY)
    except NotFound:
        return  # no policy: anything the CRD schema allows
    data = policy.data or {}
    limit = int(data.get("maxReplicas", "10"))
    if widget.spec.replicas > limit:
        raise AdmissionDenied(f"spec.replicas {widget.spec.replicas} exceeds the policy's {limit}")
    for word in filter(None, (w.strip() for w in data.get("forbiddenWords", "").split(","))):
        if word.lower() in widget.spec.message.lower():
            raise AdmissionDenied(f"spec.message contains the forbidden word {word!r}")


# -- reconciliation: four ordered stages ---------------------------------------------------------


@widgets.stage(condition="ConfigurationReady")
def configuration(widget: Widget, ctx: Context[Widget]) -> None:
    ctx.ensure(
        ConfigMap(
            metadata=ObjectMeta(name=f"{widget.name}-config", labels=_labels(widget)),
            data={"message": widget.spec.message},
        )
    )
    ctx.set_status(phase="Configuring")


@widgets.stage(condition="DeploymentApplied", depends=configuration)
def deployment(widget: Widget, ctx: Context[Widget]) -> None:
    labels = _labels(widget)
    container: dict[str, Any] = {
        "name": "web",
        "image": IMAGE,
        "args": ["netexec", "--http-port=8080"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "env": [
            {
                "name": "MESSAGE",
                "valueFrom": {
                    "configMapKeyRef": {"name": f"{widget.name}-config", "key": "message"}
                },
            }
        ],
    }
    ctx.ensure(
        Deployment.model_validate(
            {
                "metadata": {"name": widget.name, "labels": labels},
                "spec": {
                    "replicas": widget.spec.replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [container]},
                    },
                },
            }
        )
    )


@widgets.stage(condition="ServiceReady", depends=deployment)
def service(widget: Widget, ctx: Context[Widget]) -> None:
    ctx.ensure(
        Service.model_validate(
            {
                "metadata": {"name": widget.name, "labels": _labels(widget)},
                "spec": {
                    "selector": _labels(widget),
                    "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
                },
            }
        )
    )


@widgets.stage(condition="WorkloadAvailable", depends=service)
def available(widget: Widget, ctx: Context[Widget]) -> None:
    current = ctx.cached(Deployment).get(widget.name or "")
    wanted = widget.spec.replicas
    status = current.status if current is not None else None
    ready = (status.available_replicas or 0) if status is not None else 0
    generation = current.metadata.generation if current and current.metadata else None
    observed = (status.observed_generation or 0) if status is not None else 0
    ctx.set_status(available_replicas=ready)
    if generation is None or observed < generation or ready < wanted:
        ctx.set_status(phase="RollingOut")
        raise Wait("RollingOut", f"{ready}/{wanted} replicas available", after=10)
    ctx.set_status(phase="Available")


if __name__ == "__main__":
    app.main()
