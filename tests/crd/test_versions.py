"""Several models of one kind: `Versions`, its definition errors, the multi-version CRD and
hub-and-spoke conversion (with the stash annotation that keeps it lossless)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.crd import (
    CRD,
    STASH_ANNOTATION,
    ConversionError,
    Version,
    Versions,
    convert,
    custom_resource,
)
from cloudcoil_sync.testing import check_round_trip
from examples.versioned_operator import GIZMOS, Gizmo, GizmoV1Alpha1

GROUP = "examples.cloudcoil.dev"


def models(kind: str = "Thing", plural: str = "things") -> tuple[type[Resource], ...]:
    """Three fresh versions of a kind (a model can be a version of one Versions only)."""

    class Spec(BaseModel):
        size: int = 0

    made = []
    for version in ("v1alpha1", "v1beta1", "v1"):
        made.append(
            custom_resource(api_version=f"{GROUP}/{version}", kind=kind, plural=plural)(
                type(
                    f"Thing{version}",
                    (Resource,),
                    {
                        "__annotations__": {"spec": Spec},
                        "spec": Field(default_factory=Spec),
                        "__module__": __name__,
                    },
                )
            )
        )
    return tuple(made)


def same(value: Any) -> Any:
    return value


def control(app: Application, model: type[Resource]) -> None:
    def reconcile(obj: Any, ctx: Any) -> None:
        return None

    app.controller(model).reconcile()(reconcile)


def test_definition_errors_name_the_models() -> None:
    a, b, c = models()
    with pytest.raises(ValueError, match=r"two storage versions, Thingv1 and Thingv1alpha1;"):
        Versions(
            Version(c, hub=True, storage=True),
            Version(a, storage=True, to_hub=same, from_hub=same),
        )
    with pytest.raises(ValueError, match=r"Versions\(Thingv1, Thingv1alpha1\): no hub version"):
        Versions(Version(c, storage=True), Version(a, to_hub=same, from_hub=same))
    with pytest.raises(
        ValueError, match="Thingv1beta1 has no conversion path to the hub Thingv1: pass from_hub="
    ):
        Versions(Version(c, hub=True, storage=True), Version(b, to_hub=same))
    with pytest.raises(ValueError, match="the hub Thingv1 converts to nothing"):
        Versions(Version(c, hub=True, storage=True, to_hub=same))
    with pytest.raises(ValueError, match="Thingv1alpha1 has a deprecation_warning"):
        Versions(
            Version(c, hub=True, storage=True),
            Version(a, to_hub=same, from_hub=same, deprecation_warning="old"),
        )
    (other,) = models("Other", "things")[:1]
    with pytest.raises(ValueError, match="Thingv1alpha1 differs from Thingv1 in group, kind"):
        Versions(Version(c, hub=True, storage=True), Version(other, to_hub=same, from_hub=same))
    with pytest.raises(ValueError, match="Thingv1 and Thingv1 are both version v1"):
        Versions(Version(c, hub=True, storage=True), Version(c, to_hub=same, from_hub=same))
    # None of those marked the models: they still form one kind.
    Versions(Version(c, hub=True, storage=True), Version(a, to_hub=same, from_hub=same))
    with pytest.raises(ValueError, match="Thingv1 is already a version of Versions"):
        Versions(Version(c, hub=True, storage=True))


def test_multi_version_crd_lists_every_version_with_its_own_schema() -> None:
    manifest = CRD(GIZMOS).manifest()
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == f"gizmos.{GROUP}"
    v1, alpha = spec["versions"]
    assert (v1["name"], v1["served"], v1["storage"]) == ("v1", True, True)
    assert "deprecated" not in v1
    assert (alpha["name"], alpha["served"], alpha["storage"]) == ("v1alpha1", True, False)
    assert alpha["deprecated"] is True
    assert alpha["deprecationWarning"].endswith("is deprecated; use v1")
    spec_of = {v["name"]: v["schema"]["openAPIV3Schema"]["properties"]["spec"] for v in (v1, alpha)}
    assert set(spec_of["v1"]["properties"]) == {"message", "replicas"}
    assert set(spec_of["v1alpha1"]["properties"]) == {"greeting"}
    assert [c["name"] for c in v1["additionalPrinterColumns"]] == ["Message", "Phase", "Age"]
    assert [c["name"] for c in alpha["additionalPrinterColumns"]] == ["Greeting", "Phase", "Age"]
    assert spec["conversion"] == {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"]},
    }


def test_application_manifests_call_the_service_and_without_webhooks_serve_storage_only(
    tmp_path: Any,
) -> None:
    app = Application("gizmos", resources=(GIZMOS,), webhook=WebhookServer(ca_bundle=b""))
    crd = app.manifests(ca_bundle=CA)[0]
    webhook = crd["spec"]["conversion"]["webhook"]
    assert webhook["clientConfig"]["service"] == {
        "namespace": "default",
        "name": "gizmos",
        "path": f"/convert/gizmos.{GROUP}",
        "port": 443,
    }
    assert webhook["clientConfig"]["caBundle"]
    bare = app.manifests(include_webhooks=False)[0]
    assert bare["spec"]["conversion"] == {"strategy": "None"}
    assert [(v["name"], v["served"]) for v in bare["spec"]["versions"]] == [
        ("v1", True),
        ("v1alpha1", False),
    ]
    # A controller on any version brings the one CRD; without a webhook it is an error.
    other = Application("gizmos", webhook=WebhookServer())
    control(other, GizmoV1Alpha1)
    assert [d["metadata"]["name"] for d in other.manifests(ca_bundle=CA)[:1]] == [f"gizmos.{GROUP}"]
    with pytest.raises(ValueError, match=r"need their conversion webhook: pass webhook="):
        Application("gizmos", resources=(GIZMOS,)).manifests()


def test_two_single_version_models_of_one_crd_point_at_versions() -> None:
    a, _, c = models("Loose", "looses")
    app = Application("loose")
    control(app, a)
    control(app, c)
    with pytest.raises(ValueError, match=r"both define the CRD looses\..*Versions\("):
        app.manifests()


def test_conversion_renames_and_keeps_what_a_spoke_lacks() -> None:
    hub = Gizmo.model_validate(
        {"metadata": {"name": "g", "labels": {"a": "b"}}, "spec": {"message": "hi", "replicas": 3}}
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    old = convert(GIZMOS, hub, f"{GROUP}/v1alpha1")
    assert old["apiVersion"] == f"{GROUP}/v1alpha1" and old["spec"] == {"greeting": "hi"}
    assert old["metadata"]["labels"] == {"a": "b"}
    assert json.loads(old["metadata"]["annotations"][STASH_ANNOTATION]) == {
        "spec": {"message": "hi", "replicas": 3}
    }
    old["spec"]["greeting"] = "edited in v1alpha1"
    back = convert(GIZMOS, old, f"{GROUP}/v1")
    assert back["spec"] == {"message": "edited in v1alpha1", "replicas": 3}
    assert "annotations" not in back["metadata"]
    # Nothing to keep: no annotation.
    plain = convert(GIZMOS, {**hub, "spec": {"message": "x", "replicas": 1}}, f"{GROUP}/v1alpha1")
    assert "annotations" not in plain["metadata"]
    with pytest.raises(ConversionError, match="desired apiVersion 'other/v1'"):
        convert(GIZMOS, hub, "other/v1")


def test_check_round_trip_passes_for_the_example_and_names_a_lossy_conversion() -> None:
    check_round_trip(
        GIZMOS,
        Gizmo.model_validate({"metadata": {"name": "g"}, "spec": {"message": "m", "replicas": 4}}),
        GizmoV1Alpha1.model_validate({"metadata": {"name": "g"}, "spec": {"greeting": "m"}}),
    )
    a, _, c = models("Lossy", "lossies")

    def drop(value: Resource) -> Resource:
        return a.model_validate({"metadata": {"name": "x"}})

    def up(value: Resource) -> Resource:
        return c.model_validate({"metadata": {"name": "x"}, "spec": {"size": 0}})

    lossy = Versions(Version(c, hub=True, storage=True), Version(a, to_hub=up, from_hub=drop))
    size = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Lossy", "metadata": {"name": "x"}}
    with pytest.raises(AssertionError, match=r"Thingv1alpha1 -> Thingv1 -> Thingv1alpha1"):
        check_round_trip(lossy, {**size, "spec": {"size": 5}})


CA = (
    b"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2h0ZXN0Y2VydGlmaWNhdGUwCgYIKoZIzj0EAwIw\n"
    b"-----END CERTIFICATE-----\n"
)


def test_two_controllers_on_two_versions_of_one_kind_overlap() -> None:
    app = Application("gizmos", resources=(GIZMOS,), webhook=WebhookServer())
    control(app, Gizmo)
    control(app, GizmoV1Alpha1)
    with pytest.raises(ValueError, match="Two controllers reconcile the same Gizmo objects"):
        app.manifests(ca_bundle=CA)
