"""Echoes: which update events are the echo of the controller's own guarded write."""

from cloudcoil_sync.controller._internal.echoes import Echoes
from cloudcoil_sync.controller._internal.types import ResourceKey

KEY = ResourceKey("w", "ns")


def echoes() -> tuple[Echoes, list[ResourceKey]]:
    added: list[ResourceKey] = []
    return Echoes(added.append), added


def test_the_event_from_the_replaced_to_the_returned_version_is_the_echo() -> None:
    tracker, added = echoes()
    tracker.writing(KEY, "1")
    tracker.wrote(KEY, "2")
    assert not tracker.is_echo(KEY, "1", "3")  # not the version we wrote
    assert not tracker.is_echo(KEY, "2", "2")  # a resync
    assert tracker.is_echo(KEY, "1", "2")
    assert not tracker.is_echo(KEY, "1", "2")  # once
    assert added == []


def test_an_echo_before_the_answer_is_held_and_dropped_if_it_was_ours() -> None:
    tracker, added = echoes()
    tracker.writing(KEY, "1")
    assert tracker.is_echo(KEY, "1", "2")  # held: the answer decides
    tracker.wrote(KEY, "2")
    assert added == []
    assert not tracker.is_echo(KEY, "2", "3")  # nothing is left over


def test_a_held_event_that_was_not_ours_adds_its_key() -> None:
    tracker, added = echoes()
    tracker.writing(KEY, "1")
    assert tracker.is_echo(KEY, "1", "2")  # someone else's change, while ours was sent
    tracker.wrote(KEY, None)  # ours was refused (its guard saw version 2)
    assert added == [KEY]
    tracker.writing(KEY, "2")
    assert tracker.is_echo(KEY, "2", "3")
    tracker.wrote(KEY, "4")  # e.g. the object's write and then its status: 3 was not the last
    assert added == [KEY, KEY]


def test_other_keys_and_unwritten_objects_are_not_echoes() -> None:
    tracker, _ = echoes()
    tracker.writing(KEY, "1")
    assert not tracker.is_echo(ResourceKey("other", "ns"), "1", "2")
    assert not tracker.is_echo(KEY, None, "2")
