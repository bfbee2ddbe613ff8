"""Answers recorded from a real kube-apiserver 1.32, vendored here (see the README beside them).

Read by a path relative to this file, so the suite needs nothing outside the clone. A missing
recording is a broken checkout: it fails the test that asks for it, it never skips.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["KUBE_APISERVER_1_32", "exchange", "exchange_files"]

KUBE_APISERVER_1_32 = Path(__file__).resolve().parent / "kube-apiserver-1.32"


def exchange(name: str) -> dict[str, Any]:
    """The recorded request/response pair in ``name`` (a file name, or its two-digit prefix)."""
    path = KUBE_APISERVER_1_32 / name
    if not name.endswith(".json"):
        matches = sorted(KUBE_APISERVER_1_32.glob(f"{name}-*.json"))
        if len(matches) != 1:
            raise FileNotFoundError(f"no single recording {name}-*.json in {KUBE_APISERVER_1_32}")
        path = matches[0]
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def exchange_files() -> list[str]:
    """Every recording's file name, in recording order; raises if there are none."""
    names = sorted(p.name for p in KUBE_APISERVER_1_32.glob("[0-9]*.json"))
    if not names:
        raise FileNotFoundError(f"no recordings in {KUBE_APISERVER_1_32}")
    return names
