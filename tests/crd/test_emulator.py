"""The generated Widget CRD, installed in the API emulator, serves guarded JSON patches."""

from __future__ import annotations

from typing import Any

import pytest
from cloudcoil.models.kubernetes.apiextensions.v1 import CustomResourceDefinition

from cloudcoil_sync._internal.patches import diff
from cloudcoil_sync.client import Config, Invalid
from cloudcoil_sync.crd import CRD
from cloudcoil_sync.testing import Emulator

from .widget import Widget, WidgetStatus


def _established(emulator: Emulator) -> bool:
    crd = emulator.get_object(
        "apiextensions.k8s.io", "customresourcedefinitions", "", "widgets.examples.cloudcoil.dev"
    )
    conditions: list[dict[str, Any]] = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


@pytest.fixture
def widgets_config(kube_emulator: Emulator, kube_config: Config) -> Config:
    definition = CustomResourceDefinition.model_validate(CRD(Widget).manifest())
    kube_config.client(CustomResourceDefinition).create(definition)
    assert kube_emulator.wait_for(lambda: _established(kube_emulator), timeout=10)
    return kube_config


def test_diff_patches_a_widget_and_refuses_stale_snapshots(widgets_config: Config) -> None:
    widgets = widgets_config.client(Widget)
    created = widgets.create(Widget.model_validate({"metadata": {"name": "w"}}))
    edited = created.model_copy(deep=True)
    edited.spec.replicas = 3
    patched = widgets.json_patch("w", diff(created, edited))
    assert patched.spec.replicas == 3
    assert patched.metadata is not None and patched.metadata.generation == 2

    stale = created.model_copy(deep=True)
    stale.spec.message = "lost update"
    with pytest.raises(Invalid):
        widgets.json_patch("w", diff(created, stale))
    assert widgets.get("w").spec.message == "Hello from cloudcoil"


def test_status_goes_to_the_status_subresource(widgets_config: Config) -> None:
    widgets = widgets_config.client(Widget)
    created = widgets.create(Widget.model_validate({"metadata": {"name": "w"}}))
    edited = created.model_copy(deep=True)
    edited.status = WidgetStatus(phase="Ready", observedGeneration=1)
    ignored = widgets.json_patch("w", diff(created, edited))
    assert ignored.status is None
    updated = widgets.json_patch("w", diff(ignored, edited), subresource="status")
    assert updated.status is not None and updated.status.phase == "Ready"
