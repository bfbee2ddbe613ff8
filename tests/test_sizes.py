"""No module of cloudcoil_sync over 500 lines and no function over 60 (read with ``ast``).

A function's length runs from its ``def`` line to its last line, nested functions included
(they are counted on their own too). The allowlist below is empty and stays so; an entry that
is no longer over its limit fails the test too, so that the list never hides a new offender.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_graph import SOURCE

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60

#: Known offenders, path relative to cloudcoil_sync (a module, or "module:function"). Shrinks
#: to empty: remove an entry in the change that brings it under the limit.
ALLOWED: frozenset[str] = frozenset()


def oversized(source: Path) -> dict[str, int]:
    """Every module over MAX_MODULE_LINES and function over MAX_FUNCTION_LINES, by name."""
    found: dict[str, int] = {}
    for path in sorted(source.rglob("*.py")):
        name = path.relative_to(source).as_posix()
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[name] = lines
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    key = f"{name}:{node.name}"
                    found[key] = max(found.get(key, 0), length)
    return found


def test_no_module_or_function_is_over_its_limit() -> None:
    found = oversized(SOURCE)
    new = {name: size for name, size in found.items() if name not in ALLOWED}
    assert not new, (
        f"over {MAX_MODULE_LINES} lines (module) or {MAX_FUNCTION_LINES} (function): {new}"
    )


def test_the_allowlist_names_only_current_offenders() -> None:
    stale = sorted(ALLOWED - set(oversized(SOURCE)))
    assert not stale, f"no longer over the limit: remove from ALLOWED: {stale}"


def test_limits_are_measured_as_documented(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "fits.py").write_text(f"def fits():\n{body}\n")
    (tmp_path / "long.py").write_text(f"async def long():\n{body}\n    return 1\n")
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert oversized(tmp_path) == {
        "big.py": MAX_MODULE_LINES + 1,
        "long.py:long": MAX_FUNCTION_LINES + 1,
    }
