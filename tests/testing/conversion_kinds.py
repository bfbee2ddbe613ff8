"""The kind the conversion recordings were made with (``bench/conversion_record.py``) and the
emulator replays them with: ``Thing`` in ``conv.i40.example.com``, ``v1alpha1`` (served,
deprecated, ``spec.greeting``) and ``v1`` (hub and storage, ``spec.message`` and
``spec.replicas``); converting a greeting of ``fail`` to v1 fails (the webhook answers
``Failure``)."""

from __future__ import annotations

from typing import Any, Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.crd import CRD, Version, Versions, custom_resource

__all__ = ["GROUP", "THINGS", "Thing", "ThingV1Alpha1", "crd_manifest"]

GROUP = "conv.i40.example.com"
WARNING = "conv.i40.example.com/v1alpha1 Thing is deprecated; use v1"


class AlphaSpec(BaseModel):
    greeting: str = "hello"


class Spec(BaseModel):
    message: str = "hello"
    replicas: int = 1


@custom_resource(api_version=f"{GROUP}/v1alpha1", kind="Thing", plural="things")
class ThingV1Alpha1(Resource):
    api_version: Literal["conv.i40.example.com/v1alpha1"] = Field(
        default="conv.i40.example.com/v1alpha1", alias="apiVersion"
    )
    kind: Literal["Thing"] = "Thing"
    spec: AlphaSpec = Field(default_factory=AlphaSpec)


@custom_resource(api_version=f"{GROUP}/v1", kind="Thing", plural="things")
class Thing(Resource):
    api_version: Literal["conv.i40.example.com/v1"] = Field(
        default="conv.i40.example.com/v1", alias="apiVersion"
    )
    kind: Literal["Thing"] = "Thing"
    spec: Spec = Field(default_factory=Spec)


def to_v1(old: ThingV1Alpha1) -> Thing:
    if old.spec.greeting == "fail":
        raise ValueError("greeting 'fail' cannot be converted")
    return Thing(metadata=old.metadata, spec=Spec(message=old.spec.greeting))


def to_v1alpha1(new: Thing) -> ThingV1Alpha1:
    return ThingV1Alpha1(metadata=new.metadata, spec=AlphaSpec(greeting=new.spec.message))


THINGS = Versions(
    Version(Thing, hub=True, storage=True),
    Version(
        ThingV1Alpha1,
        to_hub=to_v1,
        from_hub=to_v1alpha1,
        deprecated=True,
        deprecation_warning=WARNING,
    ),
)


def crd_manifest(url: str, ca_bundle: str, storage: str = "v1") -> dict[str, Any]:
    """The CRD calling the conversion webhook at ``url`` (caBundle base64), with ``storage``
    as the storage version."""
    manifest = CRD(THINGS).manifest()
    for version in manifest["spec"]["versions"]:
        version["storage"] = version["name"] == storage
    manifest["spec"]["conversion"]["webhook"]["clientConfig"] = {
        "url": url,
        "caBundle": ca_bundle,
    }
    return manifest
