"""Causes: computed where a key is added, coalesced per key in the queue, handed to the pass."""

from __future__ import annotations

from cloudcoil_sync.controller import WorkQueue
from cloudcoil_sync.controller._internal.causes import (
    MAX_CAUSES,
    REQUEUE,
    RESYNC,
    TAKEOVER,
    Cause,
    object_cause,
    primary_causes,
    retry,
)
from cloudcoil_sync.controller._internal.changes import Change, ChangeTracker, changes_between
from cloudcoil_sync.controller._internal.store import encode
from cloudcoil_sync.controller._internal.types import ResourceKey
from tests.fake_clock import FakeClock

KEY = ResourceKey("w", "default")


def widget(version: str, **spec: object) -> dict[str, object]:
    return {
        "metadata": {"name": "w", "namespace": "default", "resourceVersion": version},
        "spec": dict(spec),
    }


def test_a_primary_update_names_the_changed_paths_by_section() -> None:
    old = widget("1", size=1, image="a")
    new = widget("2", size=2, image="a")
    new["metadata"]["labels"] = {"tier": "x"}  # type: ignore[index]
    assert set(primary_causes(old, new)) == {
        Cause("spec", ("spec.size",)),
        Cause("metadata", ("metadata.labels",)),
    }
    assert primary_causes(old, widget("1", size=9)) == (RESYNC,)


def test_list_items_and_long_path_lists_are_named_and_bounded() -> None:
    old = widget("1", ports=[{"port": 1}, {"port": 2}], **{f"f{i}": 0 for i in range(12)})
    new = widget("2", ports=[{"port": 1}, {"port": 3}], **{f"f{i}": 1 for i in range(12)})
    (cause,) = primary_causes(old, new)
    assert cause.kind == "spec" and len(cause.paths) == 9
    assert cause.paths[-1] == "+5 more"
    only_port = primary_causes(widget("1", ports=[{"port": 1}]), widget("2", ports=[{"port": 4}]))
    assert only_port == (Cause("spec", ("spec.ports[0].port",)),)


def test_child_causes_name_the_child_and_the_event() -> None:
    old = {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "1"}, "data": {"a": "1"}}
    new = {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "2"}, "data": {"a": "2"}}
    assert object_cause("child", "ConfigMap", old, new) == Cause(
        "child", ("data.a",), object="ConfigMap ns/c", event="updated"
    )
    deleted = object_cause("child", "ConfigMap", old, None)
    assert str(deleted) == "child ConfigMap ns/c deleted"


def test_coalesced_adds_keep_every_cause_once() -> None:
    queue: WorkQueue[ResourceKey] = WorkQueue()
    spec = Cause("spec", ("spec.size",))
    queue.add(KEY, spec)
    queue.add(KEY, Cause("child", object="ConfigMap default/c", event="deleted"))
    queue.add(KEY, spec)
    assert queue.get(1.0) == KEY
    assert queue.causes(KEY) == (
        spec,
        Cause("child", object="ConfigMap default/c", event="deleted"),
    )
    assert queue.causes(KEY) == ()  # handed over once
    queue.add(KEY, RESYNC)  # while in flight: the next pass's
    queue.done(KEY)
    assert queue.get(1.0) == KEY and queue.causes(KEY) == (RESYNC,)


def test_a_delayed_cause_is_the_passs_once_due_and_dropped_when_superseded() -> None:
    clock = FakeClock()
    queue: WorkQueue[ResourceKey] = WorkQueue(clock=clock)
    queue.add_after(KEY, 5.0, REQUEUE)
    queue.add(KEY, RESYNC)  # supersedes the delayed add: the pass runs now for the resync
    assert queue.get(1.0) == KEY and queue.causes(KEY) == (RESYNC,)
    queue.add(KEY, RESYNC)
    queue.add_after(KEY, 5.0, REQUEUE)  # a pass is pending already: it runs sooner
    queue.done(KEY)
    assert queue.get(1.0) == KEY and queue.causes(KEY) == (RESYNC,)
    queue.add_after(KEY, 3.0, REQUEUE)
    queue.add_after(KEY, 5.0, retry("error"))  # the earlier deadline stands, with both causes
    queue.done(KEY)
    clock.advance(3.0)
    assert queue.get(1.0) == KEY and queue.causes(KEY) == (REQUEUE, retry("error"))
    queue.retry(KEY, retry("error"))
    queue.done(KEY)
    clock.advance(2.0)
    assert queue.get(1.0) == KEY and queue.causes(KEY) == (retry("error"),)


def test_causes_per_key_are_bounded() -> None:
    queue: WorkQueue[ResourceKey] = WorkQueue()
    for index in range(MAX_CAUSES + 5):
        queue.add(KEY, Cause("mapped", object=f"Secret default/s{index}"))
    queue.note_pending(TAKEOVER)
    assert queue.get(1.0) == KEY
    causes = queue.causes(KEY)
    assert len(causes) == MAX_CAUSES + 1
    assert causes[-1] == Cause("more", event="6")


def test_changes_are_kept_from_the_last_success_only_once_asked() -> None:
    tracker = ChangeTracker()
    first, second = encode(widget("1", size=1)), encode(widget("2", size=3))
    assert tracker.changes(KEY, first, asked=False) is None and not tracker.wanted  # a debug line
    assert tracker.changes(KEY, first) is None and tracker.wanted
    tracker.succeeded(KEY, first)
    assert tracker.changes(KEY, second) == (Change("spec.size", 1, 3),)
    tracker.succeeded(KEY, None)  # deleted: forgotten
    assert tracker.changes(KEY, second) is None
    assert changes_between({"spec": {}}, {"spec": {"a": 1}}) == (Change("spec.a", None, 1),)
