"""The one check of a numeric setting: a real number (not a bool), finite."""

from __future__ import annotations

import math
from typing import TypeGuard

__all__ = ["is_number"]


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or float (never a bool) that is finite; each caller bounds it and says why."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
