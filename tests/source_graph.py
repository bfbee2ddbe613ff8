"""The import graph of cloudcoil_sync, read from its source with ``ast`` (nothing is imported).

Every import statement counts: module level, inside functions and under ``TYPE_CHECKING``,
since each one is a dependency a reader has to follow and a cycle waiting for a refactoring to
close it. ``from package import name`` is an edge to the submodule ``package.name`` when there
is one, else to the package (its ``__init__``); importing a submodule does not add edges to its
parent packages (Python runs their ``__init__`` first, but that is not a dependency of code).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PACKAGE", "SOURCE", "Module", "cycles", "import_graph", "modules"]

PACKAGE = "cloudcoil_sync"
SOURCE = Path(__file__).resolve().parent.parent / PACKAGE


@dataclass(frozen=True)
class Module:
    """One source file: its dotted name, path and parsed tree."""

    name: str
    path: Path
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def modules(source: Path = SOURCE) -> dict[str, Module]:
    """Every module of the package by dotted name."""
    found: dict[str, Module] = {}
    for path in sorted(source.rglob("*.py")):
        parts = path.relative_to(source.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = Module(name, path, ast.parse(path.read_text(), str(path)))
    return found


def _imported(module: Module) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(module named by the statement, names it takes from it) for every import in `module`."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base, tuple(alias.name for alias in node.names)


def import_graph(found: dict[str, Module] | None = None) -> dict[str, set[str]]:
    """Module → the modules of the package it imports."""
    found = modules() if found is None else found
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, module in found.items():
        for target, names in _imported(module):
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            submodules = [f"{target}.{item}" for item in names if f"{target}.{item}" in found]
            graph[name].update(submodules)
            if len(submodules) < len(names) or not names:
                graph[name].add(target)
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)
