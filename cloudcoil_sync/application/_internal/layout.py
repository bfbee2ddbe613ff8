"""``manifests --split DIR``: one YAML file per object and a ``kustomization.yaml`` listing
them in install order, for Kustomize overlays or GitOps tools, without Helm.

Files are named ``NN-<kind>-<name>.yaml`` (NN the install position, so a listing sorts in
install order); ``kustomization.yaml`` lists them in that order. Kustomize applies by its own
kind order (CRDs and RBAC first, webhook configurations last), which keeps ``install``'s
order where it matters. Files of an earlier split that this one no longer writes are
removed; nothing else in the directory is touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["KUSTOMIZATION", "file_name", "write_split"]

KUSTOMIZATION = "kustomization.yaml"
_GENERATED = re.compile(r"^\d{2,}-[a-z0-9]+-[a-z0-9.-]+\.yaml$")


def file_name(index: int, document: dict[str, Any]) -> str:
    """``NN-kind-name.yaml`` for the ``index``-th (from 1) document."""
    kind = str(document["kind"]).lower()
    name = str(document["metadata"]["name"])
    return f"{index:02d}-{kind}-{name}.yaml"


def write_split(documents: Sequence[dict[str, Any]], directory: str | Path) -> list[Path]:
    """Write ``documents`` and their kustomization.yaml into ``directory`` (created if
    missing); the paths written, kustomization.yaml last."""
    import yaml

    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    names = [file_name(i, d) for i, d in enumerate(documents, start=1)]
    for stale in target.iterdir():
        if _GENERATED.match(stale.name) and stale.name not in names:
            stale.unlink()
    written = []
    for name, document in zip(names, documents, strict=True):
        path = target / name
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        written.append(path)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": names,
    }
    path = target / KUSTOMIZATION
    path.write_text(yaml.safe_dump(kustomization, sort_keys=False))
    written.append(path)
    return written
