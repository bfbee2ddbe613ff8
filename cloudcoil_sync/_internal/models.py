"""cloudcoil's models build their pydantic validators on first use, not at import.

Importing `cloudcoil.models.kubernetes.core.v1` imports every API group of the package
(about 3,400 pydantic classes: each model, its builder and list builder): building their
validators and serializers at class creation is about a third of that import's CPU and
9 MB of its RSS, for classes an operator mostly never validates. With ``defer_build`` on
cloudcoil's base classes, a model builds on its first validation instead (a few ms for a
ConfigMap; a controller builds its primary's when its runtime is made).

The packages of the models import lazily too: ``cloudcoil.models.kubernetes`` imports all
23 API groups (and each group all its versions) for one ``from ... core.v1 import ConfigMap``,
about 2,000 classes an operator of ConfigMaps never names (~0.4 s of CPU and ~20 MB of RSS
on the bench's machine). A package whose ``__init__`` only re-exports its subpackages
(``from . import v1 as v1``, as cloudcoil's generated ones do) imports each of them when it is
first named instead (PEP 562 ``__getattr__``): ``kubernetes.apps.v1.Deployment`` and ``from
cloudcoil.models.kubernetes import apps`` work as before, and cloudcoil's kind registry walks
the packages' paths, importing what it finds, as before. ``dir()`` lists the subpackages.

It only helps models imported after cloudcoil_sync: `import cloudcoil_sync` (any of its
modules) first. Importing cloudcoil_sync imports nothing of cloudcoil for it: an import
hook sets the flag as cloudcoil's base modules load. ``CLOUDCOIL_SYNC_EAGER_MODELS=1``
keeps pydantic's default and cloudcoil's eager packages.
"""

from __future__ import annotations

import ast
import importlib
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
PACKAGES = "cloudcoil.models."  # packages of generated models: their subpackages load lazily


def _defer(module: ModuleType) -> None:
    import pydantic

    for value in list(vars(module).values()):
        if (
            isinstance(value, type)
            and issubclass(value, pydantic.BaseModel)
            and value.__module__ == module.__name__
        ):
            value.model_config["defer_build"] = True


def _reexports(source: str | None) -> list[str] | None:
    """The subpackages an ``__init__`` only re-exports (``from . import x as x``), or None
    if it does anything else."""
    if not source:
        return None
    names: list[str] = []
    for statement in ast.parse(source).body:
        if not (
            isinstance(statement, ast.ImportFrom)
            and statement.level == 1
            and statement.module is None
            and all(alias.asname in (None, alias.name) for alias in statement.names)
        ):
            return None
        names += [alias.name for alias in statement.names]
    return names


def _lazy(module: ModuleType, names: list[str]) -> None:
    """Give `module` the subpackages `names`, each imported when first named."""
    package = module.__name__

    def __getattr__(name: str) -> ModuleType:
        if name in names:
            return importlib.import_module(f"{package}.{name}")  # binds it on the package
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(module), *names})

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.__dir__ = __dir__  # type: ignore[method-assign]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        if module.__name__.startswith(PACKAGES):  # a package of models
            get_source = getattr(self._inner, "get_source", None)
            names = _reexports(get_source(module.__name__) if get_source else None)
            if names is not None:
                _lazy(module, names)
                return
            self._inner.exec_module(module)
            return
        self._inner.exec_module(module)
        _defer(module)  # before any module importing it defines a model


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in BASES and not (name.startswith(PACKAGES) and path is not None):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                lazy = name in BASES or spec.submodule_search_locations is not None
                if lazy and spec.loader is not None and hasattr(spec.loader, "exec_module"):
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
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    return True
