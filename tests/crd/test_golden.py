"""The golden Widget CRD of reference section 7, document for document."""

from __future__ import annotations

from typing import Any

import yaml
from cloudcoil.models.kubernetes.apiextensions.v1 import CustomResourceDefinition

from cloudcoil_sync.crd import CRD

from .widget import Widget

GOLDEN = yaml.safe_load(
    """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.examples.cloudcoil.dev}
spec:
  group: examples.cloudcoil.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wd]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema: {openAPIV3Schema: ELIDED}
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Phase, type: string, priority: 0, jsonPath: .status.phase}
    - {name: Age, type: date, priority: 0, jsonPath: .metadata.creationTimestamp}
"""
)


def _schema(manifest: dict[str, Any]) -> dict[str, Any]:
    version = manifest["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    version["schema"]["openAPIV3Schema"] = "ELIDED"
    return schema


def test_widget_crd_matches_the_golden_document() -> None:
    manifest = CRD(Widget).manifest()
    _schema(manifest)
    assert manifest == GOLDEN


def test_widget_schema_shape() -> None:
    schema = _schema(CRD(Widget).manifest())
    properties = schema["properties"]
    assert schema["type"] == "object"
    assert properties["apiVersion"] == {"type": "string"}
    assert properties["kind"] == {"type": "string"}
    assert properties["metadata"] == {"type": "object"}
    spec = properties["spec"]
    assert spec["type"] == "object"
    assert spec["properties"]["message"]["type"] == "string"
    assert spec["properties"]["replicas"]["x-kubernetes-validations"] == [
        {"rule": "self >= 0 && self <= 10", "message": "replicas must be 0..10"}
    ]
    status = properties["status"]
    assert status["type"] == "object" and status["nullable"] is True
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    condition = conditions["items"]
    assert {"type", "status", "reason", "message", "lastTransitionTime"} <= set(
        condition["required"]
    )
    assert condition["properties"]["lastTransitionTime"]["format"] == "date-time"
    generation = status["properties"]["observedGeneration"]
    assert generation["type"] == "integer" and generation["nullable"] is True
    phase = status["properties"]["phase"]
    assert phase["type"] == "string" and phase["nullable"] is True
    assert "x-cloudcoil-printer-column" not in repr(schema)
    assert "$ref" not in repr(schema) and "anyOf" not in repr(schema)


def test_widget_crd_is_a_valid_custom_resource_definition() -> None:
    manifest = CRD(Widget).manifest()
    parsed = CustomResourceDefinition.model_validate(manifest)
    assert parsed.spec.names.kind == "Widget"
    assert parsed.spec.versions[0].subresources is not None
    again = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert (
        again["spec"]["versions"][0]["additionalPrinterColumns"]
        == (manifest["spec"]["versions"][0]["additionalPrinterColumns"])
    )
    assert again["metadata"] == {"name": "widgets.examples.cloudcoil.dev"}


def test_yaml_round_trip_and_independent_copies() -> None:
    crd = CRD(Widget)
    assert yaml.safe_load(crd.to_yaml()) == crd.manifest()
    assert crd.to_yaml().startswith("apiVersion: apiextensions.k8s.io/v1\nkind: Custom")
    copy = crd.manifest()
    copy["spec"]["names"]["plural"] = "changed"
    assert crd.manifest()["spec"]["names"]["plural"] == "widgets"


def test_crd_attributes() -> None:
    crd = CRD(Widget)
    assert (crd.resource, crd.plural, crd.scope) == (Widget, "widgets", "Namespaced")
    assert (crd.group, crd.version, crd.kind) == ("examples.cloudcoil.dev", "v1alpha1", "Widget")
    assert crd.name == "widgets.examples.cloudcoil.dev"
    assert crd.status is True


def test_decorated_widget_serializes_its_type_fields() -> None:
    widget = Widget.model_validate({"metadata": {"name": "w"}, "spec": {"replicas": 2}})
    dumped = widget.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["apiVersion"] == "examples.cloudcoil.dev/v1alpha1"
    assert dumped["kind"] == "Widget"
    assert Widget.gvk().api_version == "examples.cloudcoil.dev/v1alpha1"
