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


def run(first: str, **env: str) -> dict[str, object]:
    import json

    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(first=first)],
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
