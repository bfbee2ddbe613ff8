"""The SPEC's example operator, built per test (optionally with a hook in its reconcile)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application

from .conftest import LABEL, Calls


def settings_app(
    *,
    calls: Calls | None = None,
    hook: Callable[[ConfigMap], None] | None = None,
    controller_options: dict[str, Any] | None = None,
    **options: Any,
) -> Application:
    """`Application("settings")` labelling selected ConfigMaps `managed-by: cloudcoil`."""
    app = Application("settings", **options)
    configs = app.controller(
        ConfigMap, label_selector=f"{LABEL}=true", **(controller_options or {})
    )

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        if calls is not None:
            calls.add(("reconcile", config.name))
        if hook is not None:
            hook(config)
        config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
        return config

    return app
