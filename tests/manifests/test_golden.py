"""Golden files: the exact `manifests` output of each definition in `apps.py`.

Regenerate deliberately with ``CLOUDCOIL_SYNC_REGENERATE_GOLDENS=1 pytest tests/manifests``,
then review the diff. The caBundle (a fresh test CA each run) is checked, then shown as
``<caBundle>``; CRD schemas (tested with the CRD generator) are shown as ``<schema>``.
"""

from __future__ import annotations

import base64
import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from cloudcoil.resources import parse

from .apps import APPS

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("CLOUDCOIL_SYNC_REGENERATE_GOLDENS") == "1"


def normalized(documents: list[dict[str, Any]], ca: bytes) -> list[dict[str, Any]]:
    documents = copy.deepcopy(documents)
    for document in documents:
        # The schema belongs to the CRD generator's own tests; keep the rest exact.
        for version in document.get("spec", {}).get("versions", []):
            if document["kind"] == "CustomResourceDefinition":
                version["schema"] = {"openAPIV3Schema": "<schema>"}
        for webhook in document.get("webhooks", []):
            config = webhook["clientConfig"]
            assert base64.b64decode(config["caBundle"]) == ca
            config["caBundle"] = "<caBundle>"
    return documents


@pytest.mark.parametrize("name", sorted(APPS))
def test_manifests_match_golden_file(
    name: str, ca_pair: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLOUDCOIL_NAMESPACE", "operators")
    app, options = APPS[name](ca_pair[0])
    documents = app.manifests(**options)
    text = yaml.safe_dump_all(normalized(documents, ca_pair[0]), sort_keys=False)
    path = GOLDEN / f"{name}.yaml"
    if REGENERATE:
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} changed; regenerate deliberately and review"
    # Deterministic: a second build of a fresh definition is identical.
    again, _ = APPS[name](ca_pair[0])
    assert again.manifests(**options) == documents


@pytest.mark.parametrize("name", sorted(APPS))
def test_every_document_is_a_valid_kubernetes_kind(name: str, ca_pair: tuple[bytes, bytes]) -> None:
    app, options = APPS[name](ca_pair[0])
    for document in app.manifests(**options):
        model = parse(document)
        assert type(model).__name__ == document["kind"]
        assert model.model_dump(mode="json", by_alias=True, exclude_unset=True) == document


def test_app_to_yaml_is_the_cli_output(ca_pair: tuple[bytes, bytes]) -> None:
    app, options = APPS["widgets"](ca_pair[0])
    expected = yaml.safe_dump_all(app.manifests(**options), sort_keys=False)
    assert app.to_yaml(**options) == expected
