"""The public API: every name in the ``__all__`` of each public module of cloudcoil_sync.

A module is public unless a part of its dotted path starts with an underscore. The snapshot
(`public_api.txt` beside this file) has one ``module.name`` a line; after changing the API on
purpose, rewrite it with ``.venv/bin/python tests/public_api.py --write`` and commit it with the
change (docs/contributing.md).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["SNAPSHOT", "public_modules", "public_names"]

SNAPSHOT = Path(__file__).resolve().parent / "public_api.txt"
PACKAGE = "cloudcoil_sync"


def public_modules() -> list[ModuleType]:
    """Every public module and package of cloudcoil_sync that defines ``__all__``, imported."""
    root = importlib.import_module(PACKAGE)
    names = [PACKAGE]
    for info in pkgutil.walk_packages(root.__path__, PACKAGE + "."):
        parts = info.name.split(".")
        if not any(part.startswith("_") for part in parts):
            names.append(info.name)
    modules = [importlib.import_module(name) for name in sorted(names)]
    return [module for module in modules if hasattr(module, "__all__")]


def public_names() -> list[str]:
    """``module.name`` for every name in a public ``__all__``, sorted."""
    found: list[str] = []
    for module in public_modules():
        exported = list(module.__all__)
        duplicates = sorted({n for n in exported if exported.count(n) > 1})
        if duplicates:
            raise AssertionError(f"{module.__name__}.__all__ lists {duplicates} twice")
        missing = sorted(n for n in exported if not hasattr(module, n))
        if missing:
            raise AssertionError(f"{module.__name__}.__all__ names {missing}, which do not exist")
        found.extend(f"{module.__name__}.{name}" for name in exported)
    return sorted(found)


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print("usage: python tests/public_api.py --write", file=sys.stderr)
        return 2
    names = public_names()
    SNAPSHOT.write_text("\n".join(names) + "\n")
    print(f"wrote {len(names)} names to {SNAPSHOT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
