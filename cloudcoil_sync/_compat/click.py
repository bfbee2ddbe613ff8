"""click: ``ParamType`` is generic in its value type from click 8.2 on, a plain class in 8.1.

Subclass `ParamType` from here: mypy --strict sees the type arguments, and at run time it is
click's own class whichever version is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

__all__ = ["ParamType"]

if TYPE_CHECKING:
    ParamType = click.ParamType[Any]
else:
    ParamType = click.ParamType
