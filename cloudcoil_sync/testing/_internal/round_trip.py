"""`check_round_trip`: the test-time check that conversions between versions lose nothing."""

from __future__ import annotations

from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync.crd import Versions
from cloudcoil_sync.crd._internal.convert import round_trip_problems

__all__ = ["check_round_trip"]


def check_round_trip(versions: Versions, *objects: Resource | dict[str, Any]) -> None:
    """Convert each object (of any version) to every other version and back; raise
    AssertionError naming each round trip that changes the object (body, labels or
    annotations). Give objects that set every field, in each version."""
    if not objects:
        raise ValueError("check_round_trip needs at least one object")
    problems = [problem for obj in objects for problem in round_trip_problems(versions, obj)]
    if problems:
        raise AssertionError("; ".join(problems))
