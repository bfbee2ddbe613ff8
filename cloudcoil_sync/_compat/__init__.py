"""Everything cloudcoil_sync reads or sets inside a dependency, one module per dependency.

A dependency's internals can change in any release; here they are in one place, each module
with a ``check`` that raises `DependencyChanged` naming what the installed version no longer
offers (tests/compat runs them against the installed versions). waitress's internals stay
with the one module that drives them (``admission/channel.py``, ``WAITRESS_INTERNALS``).
Typing shims live here too when a dependency's types differ between supported versions
(``click.ParamType``: generic from click 8.2); they read no internals and need no check.
"""

from __future__ import annotations

from importlib.metadata import version

__all__ = ["DependencyChanged", "changed"]


class DependencyChanged(RuntimeError):
    """An installed dependency no longer offers an internal cloudcoil_sync relies on."""


def changed(distribution: str, what: str, use: str) -> DependencyChanged:
    """The error for `distribution` (installed version included) lacking `what`, used for `use`."""
    return DependencyChanged(
        f"{distribution} {version(distribution)} no longer offers {what}, which cloudcoil_sync "
        f"uses {use}"
    )
