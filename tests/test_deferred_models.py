"""cloudcoil's models imported after cloudcoil_sync build their validators on first use."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import json, sys
{first}
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Pod
from cloudcoil.models.kubernetes.apps.v1 import Deployment
deferred = not Pod.__pydantic_complete__ and not Deployment.Builder.__pydantic_complete__
cm = ConfigMap.model_validate_json(b'{{"metadata": {{"name": "a", "labels": {{"x": "y"}}}}}}')
print(json.dumps({{
    "deferred": deferred,
    "built": ConfigMap.__pydantic_complete__,
    "dump": cm.model_dump(mode="json", by_alias=True, exclude_none=True),
}}))
"""


def run(first: str, script: str = SCRIPT, **env: str) -> dict[str, object]:
    """`script` in a fresh interpreter after the import `first`; its JSON answer."""
    import json

    out = subprocess.run(
        [sys.executable, "-c", script.format(first=first)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_models_imported_after_cloudcoil_sync_build_on_first_use() -> None:
    result = run("import cloudcoil_sync")
    assert result["deferred"] is True
    assert result["built"] is True  # validated once: built then
    assert result["dump"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "labels": {"x": "y"}},
    }


def test_eager_models_on_request_or_when_imported_first() -> None:
    eager = run("import cloudcoil_sync", CLOUDCOIL_SYNC_EAGER_MODELS="1")
    assert eager["deferred"] is False
    first = run("import cloudcoil.models.kubernetes.core.v1\nimport cloudcoil_sync")
    assert first["deferred"] is False
    assert eager["dump"] == first["dump"]


def test_a_controller_runtime_builds_its_deferred_primary() -> None:
    script = """
import cloudcoil_sync
from cloudcoil.models.kubernetes.core.v1 import Secret
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime
assert not Secret.__pydantic_complete__
config = Config(server="https://127.0.0.1:1", token="t", namespace="default")
secrets = Controller(Secret)
secrets.reconcile()(lambda secret: None)
ControllerRuntime(secrets, config)
print(Secret.__pydantic_complete__)
config.close()
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "True"


LAZY = """
import json, sys
{first}
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
loaded = sorted(m.split(".")[3] for m in sys.modules if m.count(".") == 3
                and m.startswith("cloudcoil.models.kubernetes."))
import cloudcoil.models.kubernetes as k8s
from cloudcoil.models.kubernetes import batch
from cloudcoil.resources import get_model
named = [k8s.apps.v1.Deployment.__name__, batch.v1.Job.__name__, "rbac" in dir(k8s)]
found = get_model("ClusterRole", api_version="rbac.authorization.k8s.io/v1").__name__
try:
    k8s.nothing
except AttributeError as error:
    missing = str(error)
print(json.dumps({{"loaded": loaded, "named": named, "found": found, "missing": missing}}))
"""


def test_model_packages_import_each_group_when_it_is_first_named() -> None:
    def lazy(first: str, **env: str) -> dict[str, object]:
        return run(first, LAZY, **env)

    deferred = lazy("import cloudcoil_sync")
    assert deferred["loaded"] == ["core"]  # not the 22 other API groups
    assert deferred["named"] == ["Deployment", "Job", True]
    assert deferred["found"] == "ClusterRole"  # cloudcoil's registry still finds every kind
    assert "has no attribute 'nothing'" in str(deferred["missing"])
    eager = lazy("import cloudcoil_sync", CLOUDCOIL_SYNC_EAGER_MODELS="1")
    assert len(eager["loaded"]) == 23  # type: ignore[arg-type]
    assert {k: v for k, v in eager.items() if k != "loaded"} == {
        k: v for k, v in deferred.items() if k != "loaded"
    }
