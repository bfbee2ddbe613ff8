from typing import Any

import pytest

from cloudcoil_sync.controller._internal.triggers import (
    Triggers,
    mapped_keys,
    owner_keys,
    primary_key,
    status_only_change,
)
from cloudcoil_sync.controller._internal.types import ResourceKey


def obj(rv: str, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns", "resourceVersion": rv, "generation": 1},
        "spec": {"size": 1},
        "status": {"phase": "A"},
    }
    base.update(changes)
    return base


def test_primary_key() -> None:
    assert primary_key(obj("1")) == ResourceKey("w", "ns")


def test_status_only_changes_are_detected() -> None:
    assert status_only_change(obj("1"), obj("2", status={"phase": "B"}))
    managed = obj("2")
    managed["metadata"]["managedFields"] = [{"manager": "x"}]
    assert status_only_change(obj("1"), managed)
    assert not status_only_change(obj("1"), obj("2", spec={"size": 2}))
    labelled = obj("2")
    labelled["metadata"]["labels"] = {"a": "b"}
    assert not status_only_change(obj("1"), labelled)
    # A resync (same resourceVersion) always counts.
    assert not status_only_change(obj("1"), obj("1"))


def test_the_echo_of_our_own_write_adds_no_key() -> None:
    added: list[ResourceKey] = []

    class Queue:
        def add(self, key: ResourceKey, cause: object = None) -> None:
            added.append(key)

    asked: list[tuple[ResourceKey, str | None, str | None]] = []

    def echo(key: ResourceKey, old: str | None, new: str | None) -> bool:
        asked.append((key, old, new))
        return (old, new) == ("1", "2")  # our write replaced 1 and returned 2

    triggers = Triggers(
        Queue(),
        group="example.com",
        kind="Widget",
        namespaced=True,
        status_updates=True,
        lookup=lambda key: None,
        echo=echo,
    )
    triggers.primary_update(obj("1"), obj("2", spec={"size": 2}))
    assert added == [] and asked == [(ResourceKey("w", "ns"), "1", "2")]
    triggers.primary_update(obj("2"), obj("3", spec={"size": 3}))  # someone else's change
    triggers.primary_update(obj("3"), obj("3"))  # a resync
    assert added == [ResourceKey("w", "ns"), ResourceKey("w", "ns")]


def child(*references: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": namespace, "ownerReferences": list(references)}}


def ref(**fields: Any) -> dict[str, Any]:
    base = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w",
        "uid": "u1",
        "controller": True,
    }
    base.update(fields)
    return base


def cache(**objects: str) -> Any:
    def lookup(key: ResourceKey) -> dict[str, Any] | None:
        uid = objects.get(key.name)
        return None if uid is None else {"metadata": {"name": key.name, "uid": uid}}

    return lookup


def test_owner_keys_need_controller_kind_group_and_uid() -> None:
    options = {
        "group": "example.com",
        "kind": "Widget",
        "namespaced": True,
        "lookup": cache(w="u1"),
    }
    assert owner_keys(child(ref()), **options) == [ResourceKey("w", "ns")]
    assert owner_keys(child(ref(controller=False)), **options) == []
    assert owner_keys(child(ref(kind="Gadget")), **options) == []
    assert owner_keys(child(ref(apiVersion="other.com/v1")), **options) == []
    assert owner_keys(child(ref(uid="recreated")), **options) == []
    assert owner_keys(child(ref(name="missing")), **options) == []
    assert owner_keys({"metadata": {"name": "orphan"}}, **options) == []
    # Another version of the same group still matches.
    assert owner_keys(child(ref(apiVersion="example.com/v2")), **options) == [
        ResourceKey("w", "ns")
    ]


def test_cluster_scoped_owner_of_namespaced_child() -> None:
    lookup = cache(w="u1")
    keys = owner_keys(
        child(ref(), namespace="anywhere"),
        group="example.com",
        kind="Widget",
        namespaced=False,
        lookup=lookup,
    )
    assert keys == [ResourceKey("w")]


def test_core_group_owner() -> None:
    keys = owner_keys(
        child(ref(apiVersion="v1", kind="ConfigMap")),
        group="",
        kind="ConfigMap",
        namespaced=True,
        lookup=cache(w="u1"),
    )
    assert keys == [ResourceKey("w", "ns")]


def test_mappers_get_copies_and_must_return_keys() -> None:
    original = {"metadata": {"name": "m", "namespace": "ns"}, "data": {"target": "t"}}

    def mapper(value: dict[str, Any]) -> list[ResourceKey]:
        value["data"]["target"] = "mutated"
        return [ResourceKey("t", "ns")]

    assert mapped_keys(mapper, original, name="mapper") == [ResourceKey("t", "ns")]
    assert original["data"]["target"] == "t"
    assert mapped_keys(lambda value: None, original, name="none") == []  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="Watch mapper bad must return ResourceKey values, got str"):
        mapped_keys(lambda value: ["ns/t"], original, name="bad")  # type: ignore[list-item]
