"""cloudcoil's models build their pydantic validators on first use, not at import.

Importing `cloudcoil.models.kubernetes.core.v1` imports every API group of the package
(about 3,400 pydantic classes: each model, its builder and list builder): building their
validators and serializers at class creation is about a third of that import's CPU and
9 MB of its RSS, for classes an operator mostly never validates. With ``defer_build`` on
cloudcoil's base classes, a model builds on its first validation instead (a few ms for a
ConfigMap; a controller builds its primary's when its runtime is made).

It only helps models imported after cloudcoil_sync: `import cloudcoil_sync` (any of its
modules) first. Importing cloudcoil_sync imports nothing of cloudcoil for it: an import
hook sets the flag as cloudcoil's base modules load. ``CLOUDCOIL_SYNC_EAGER_MODELS=1``
keeps pydantic's default.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["BASES", "EAGER_ENV", "defer_model_builds"]

EAGER_ENV = "CLOUDCOIL_SYNC_EAGER_MODELS"
BASES = ("cloudcoil.pydantic", "cloudcoil.resources")  # every generated model's bases


def _defer(module: ModuleType) -> None:
    import pydantic

    for value in list(vars(module).values()):
        if (
            isinstance(value, type)
            and issubclass(value, pydantic.BaseModel)
            and value.__module__ == module.__name__
        ):
            value.model_config["defer_build"] = True


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _defer(module)  # before any module importing it defines a model


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in BASES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def defer_model_builds() -> bool:
    """Defer the builds of cloudcoil models imported from now on; False if too late (a
    model package is imported already) or turned off."""
    if os.environ.get(EAGER_ENV) or "cloudcoil.models" in sys.modules:
        return False
    for name in BASES:
        if name in sys.modules:
            _defer(sys.modules[name])
    missing = not all(name in sys.modules for name in BASES)
    if missing and not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    return True
