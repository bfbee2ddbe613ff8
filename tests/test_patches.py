"""cloudcoil_sync._internal.patches: json_diff, guarded diff and admission mutation_patch."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field, field_validator

from cloudcoil_sync._internal.patches import MutationBase, diff, json_diff, mutation_patch, pointer
from cloudcoil_sync.crd import custom_resource

# -- a tiny RFC 6902 applier, independent of the code under test ---------------------------


def _tokens(path: str) -> list[str]:
    assert path == "" or path.startswith("/"), path
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def apply_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    document = copy.deepcopy(document)
    for operation in operations:
        op, tokens = operation["op"], _tokens(operation["path"])
        if not tokens:
            assert op in ("replace", "test"), operation
            if op == "test":
                assert _same_json(document, operation["value"]), operation
            else:
                document = copy.deepcopy(operation["value"])
            continue
        parent = document
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op == "add":
                parent.insert(index, copy.deepcopy(operation["value"]))
            elif op == "remove":
                del parent[index]
            elif op == "replace":
                parent[index] = copy.deepcopy(operation["value"])
            else:
                assert op == "test" and _same_json(parent[index], operation["value"])
            continue
        assert isinstance(parent, dict), operation
        if op == "add":
            parent[last] = copy.deepcopy(operation["value"])
        elif op == "remove":
            del parent[last]
        elif op == "replace":
            assert last in parent, operation
            parent[last] = copy.deepcopy(operation["value"])
        else:
            assert op == "test" and _same_json(parent[last], operation["value"]), operation
    return document


# -- json_diff ------------------------------------------------------------------------------


def test_pointer_escaping() -> None:
    assert pointer("metadata", "labels", "app.kubernetes.io/name") == (
        "/metadata/labels/app.kubernetes.io~1name"
    )
    assert pointer("a~b", "c/~d") == "/a~0b/c~1~0d"
    assert json_diff({}, {"a/b": 1, "m~n": 2}) == [
        {"op": "add", "path": "/a~1b", "value": 1},
        {"op": "add", "path": "/m~0n", "value": 2},
    ]


def test_objects_recurse_in_sorted_order_and_arrays_are_replaced_whole() -> None:
    before = {"z": 1, "a": {"keep": 1, "drop": 2}, "list": [1, 2, 3]}
    after = {"z": 2, "a": {"keep": 1, "new": None}, "list": [1, 2]}
    assert json_diff(before, after) == [
        {"op": "remove", "path": "/a/drop"},
        {"op": "add", "path": "/a/new", "value": None},
        {"op": "replace", "path": "/list", "value": [1, 2]},
        {"op": "replace", "path": "/z", "value": 2},
    ]


def test_nulls_and_type_changes_are_explicit() -> None:
    assert json_diff({"a": 1}, {"a": None}) == [{"op": "replace", "path": "/a", "value": None}]
    assert json_diff({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    assert json_diff({"a": 1}, {"a": 1.0}) == [{"op": "replace", "path": "/a", "value": 1.0}]
    assert json_diff({"a": {"b": 1}}, {"a": [1]}) == [{"op": "replace", "path": "/a", "value": [1]}]
    assert json_diff([1], {"a": 1}) == [{"op": "replace", "path": "", "value": {"a": 1}}]


def test_number_types_inside_arrays_and_objects_are_compared_as_json() -> None:
    # Python calls these equal (1 == 1.0 == True, -0.0 == 0.0); their JSON differs.
    for old, new in [([1, 2], [1.0, 2]), ([{"x": 1}], [{"x": True}]), ([0.0], [-0.0])]:
        assert json_diff({"a": old}, {"a": new}) == [{"op": "replace", "path": "/a", "value": new}]
    assert json_diff({"a": {"b": [1]}}, {"a": {"b": [True]}}) == [
        {"op": "replace", "path": "/a/b", "value": [True]}
    ]
    assert json_diff({"a": {"b": 1, "c": [2.5]}}, {"a": {"c": [2.5], "b": 1}}) == []


def test_unchanged_documents_need_no_patch() -> None:
    document = {"a": [{"b": 1, "c": [None]}], "d": "x"}
    assert json_diff(document, copy.deepcopy(document)) == []
    assert json_diff({"a": 1, "b": 2}, {"b": 2, "a": 1}) == []


def test_patch_values_are_copies() -> None:
    after = {"a": {"b": [1]}}
    patch = json_diff({}, after)
    after["a"]["b"].append(2)
    assert patch == [{"op": "add", "path": "/a", "value": {"b": [1]}}]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="JSON cannot represent"):
        json_diff({}, {"a": [bad]})
    with pytest.raises(ValueError, match="JSON cannot represent"):
        json_diff({"a": bad}, {})


def test_non_json_values_are_rejected() -> None:
    with pytest.raises(TypeError, match="non-string object key"):
        json_diff({}, {1: "a"})
    with pytest.raises(TypeError, match="set"):
        json_diff({}, {"a": {1}})


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet="ab~/ ", max_size=3),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet="ab~/", max_size=3), children, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values, json_values)
def test_applying_the_patch_yields_after(before: Any, after: Any) -> None:
    patch = json_diff(before, after)
    assert all(operation["op"] in ("add", "remove", "replace") for operation in patch)
    assert _same_json(apply_patch(before, patch), after)


@given(json_values)
def test_identical_values_give_empty_patches(value: Any) -> None:
    assert json_diff(value, copy.deepcopy(value)) == []


# -- diff ------------------------------------------------------------------------------------


def fetched_config_map(**data: str) -> ConfigMap:
    return ConfigMap.model_validate(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"},
            "data": dict(data),
        }
    )


def test_diff_is_guarded_by_uid_and_resource_version() -> None:
    before = fetched_config_map(a="1", b="2")
    after = before.model_copy(deep=True)
    after.data = {"a": "1", "b": "3", "c/d": "4"}
    assert diff(before, after) == [
        {"op": "test", "path": "/metadata/uid", "value": "u-1"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "replace", "path": "/data/b", "value": "3"},
        {"op": "add", "path": "/data/c~1d", "value": "4"},
    ]


def test_diff_without_changes_is_empty() -> None:
    before = fetched_config_map(a="1")
    assert diff(before, before.model_copy(deep=True)) == []


def test_diff_setting_none_removes_the_field() -> None:
    before = fetched_config_map(a="1")
    after = before.model_copy(deep=True)
    after.data = None
    assert diff(before, after)[2:] == [{"op": "remove", "path": "/data"}]


def test_diff_applies_to_the_fetched_object() -> None:
    before = fetched_config_map(a="1")
    after = before.model_copy(deep=True)
    after.metadata.labels = {"x": "y"}  # type: ignore[union-attr]
    wire = before.model_dump(mode="json", by_alias=True, exclude_none=True)
    result = apply_patch(wire, diff(before, after))
    assert result == after.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "other"}, "A resource diff cannot change kind, name, or namespace"),
        ({"namespace": "other"}, "A resource diff cannot change kind, name, or namespace"),
        ({"uid": "u-2"}, "A resource diff cannot change UID or resourceVersion"),
        ({"resource_version": "8"}, "A resource diff cannot change UID or resourceVersion"),
    ],
)
def test_diff_refuses_identity_changes(change: dict[str, str], message: str) -> None:
    before = fetched_config_map(a="1")
    after = before.model_copy(deep=True)
    after.metadata = after.metadata.model_copy(update=change)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=message):
        diff(before, after)


def test_diff_refuses_kind_changes() -> None:
    before = fetched_config_map()
    after = before.model_copy(update={"kind": "Secret"})
    with pytest.raises(ValueError, match="cannot change kind, name, or namespace"):
        diff(before, after)


string_maps = st.none() | st.dictionaries(st.text("ab/~.", max_size=3), st.text(max_size=3))


@given(string_maps, string_maps, string_maps, string_maps)
def test_diff_applied_to_the_fetched_object_gives_the_edit(
    data: dict[str, str] | None,
    new_data: dict[str, str] | None,
    labels: dict[str, str] | None,
    new_labels: dict[str, str] | None,
) -> None:
    before = fetched_config_map()
    before.data, before.metadata.labels = data, labels  # type: ignore[union-attr]
    after = before.model_copy(deep=True)
    after.data, after.metadata.labels = new_data, new_labels  # type: ignore[union-attr]
    patch = diff(before, after)
    wire = before.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert apply_patch(wire, patch) == after.model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    assert (patch == []) == (data == new_data and labels == new_labels)


def test_diff_needs_a_fetched_object() -> None:
    unsaved = ConfigMap.model_validate({"metadata": {"name": "c", "namespace": "ns"}})
    message = "An optimistic diff needs a fetched resource with UID and resourceVersion"
    with pytest.raises(ValueError, match=message):
        diff(unsaved, unsaved.model_copy(deep=True))
    with pytest.raises(ValueError, match=message):
        diff(ConfigMap(), ConfigMap())


# -- mutation_patch --------------------------------------------------------------------------


class Port(BaseModel):
    name: str
    port: int = 80
    protocol: str | None = None


class Item(BaseModel):
    value: int = 0
    note: str | None = None
    weight: float | None = None


class Spec(BaseModel):
    replicas: int = 1
    message: str | None = None
    ports: list[Port] = Field(default_factory=list)
    items: list[Item] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    labels: dict[str, str] | None = None


@custom_resource(api_version="example.com/v1", plural="things")
class Thing(Resource):
    spec: Spec = Field(default_factory=Spec)


def raw_thing(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": "ns", "uid": "u", "annotations": {"k": "v"}},
        "spec": {"future": {"kept": True}, **spec},
        "unknownTop": [1, 2],
    }


def edit(raw: dict[str, Any]) -> tuple[Thing, Thing]:
    before = Thing.model_validate(raw)
    return before, before.model_copy(deep=True)


def typed(document: dict[str, Any]) -> dict[str, Any]:
    return Thing.model_validate(document).model_dump(mode="json", by_alias=True)


def test_mutation_patch_only_writes_the_change() -> None:
    raw = raw_thing(ports=[{"name": "http", "extra": 1}])
    before, after = edit(raw)
    after.spec.message = "hi"
    assert mutation_patch(raw, before, after) == [
        {"op": "add", "path": "/spec/message", "value": "hi"}
    ]


def test_unchanged_mutation_needs_no_patch_and_leaves_raw_alone() -> None:
    raw = raw_thing(replicas=3, items=[{"value": 1, "x": 0}])
    snapshot = copy.deepcopy(raw)
    before, after = edit(raw)
    assert mutation_patch(raw, before, after) == []
    after.spec.replicas = 3  # re-assigning the current value changes nothing
    assert mutation_patch(raw, before, after) == []
    assert raw == snapshot


def test_explicitly_assigned_defaults_are_written() -> None:
    raw = raw_thing()
    before, after = edit(raw)
    after.spec.replicas = 1
    after.spec.tags = []
    assert mutation_patch(raw, before, after) == [
        {"op": "add", "path": "/spec/replicas", "value": 1},
        {"op": "add", "path": "/spec/tags", "value": []},
    ]


def test_named_elements_keep_unknown_fields() -> None:
    raw = raw_thing(ports=[{"name": "http", "extra": 1}, {"name": "metrics", "port": 9}])
    before, after = edit(raw)
    after.spec.ports[0].port = 8080
    after.spec.ports.reverse()
    after.spec.ports.append(Port(name="https", port=443))
    assert mutation_patch(raw, before, after) == [
        {
            "op": "replace",
            "path": "/spec/ports",
            "value": [
                {"name": "metrics", "port": 9},
                {"name": "http", "extra": 1, "port": 8080},
                {"name": "https", "port": 443, "protocol": None},
            ],
        }
    ]


def test_unnamed_elements_are_matched_by_equality_and_position() -> None:
    raw = raw_thing(items=[{"value": 1, "x": "a"}, {"value": 2, "x": "b"}])
    before, after = edit(raw)
    after.spec.items[1].value = 3
    assert mutation_patch(raw, before, after)[0]["value"] == [
        {"value": 1, "x": "a"},
        {"value": 3, "x": "b"},
    ]
    raw["spec"]["items"][0] = {"value": 1}
    before, after = edit(raw)
    del after.spec.items[0]
    after.spec.items.append(Item(value=5))
    assert mutation_patch(raw, before, after)[0]["value"] == [
        {"value": 2, "x": "b"},
        {"value": 5, "note": None, "weight": None},
    ]


def test_raw_integers_in_float_fields_still_match() -> None:
    raw = raw_thing(items=[{"value": 1, "weight": 2, "x": 1}, {"value": 2}])
    before, after = edit(raw)
    after.spec.items.append(Item(value=3))
    assert mutation_patch(raw, before, after)[0]["value"] == [
        {"value": 1, "weight": 2, "x": 1},
        {"value": 2},
        {"value": 3, "note": None, "weight": None},
    ]


def test_built_in_kinds_keep_unknown_and_defaulted_fields() -> None:
    raw: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "web:1", "futureField": {"on": True}},
                        {"name": "sidecar", "image": "proxy:1"},
                    ]
                },
            },
        },
    }
    before = Deployment.model_validate(raw)
    after = before.model_copy(deep=True)
    after.metadata.labels = {"team": "a"}  # type: ignore[union-attr]
    after.spec.template.spec.containers[0].image = "web:2"  # type: ignore[union-attr]
    patch = mutation_patch(raw, before, after)
    assert patch == [
        {"op": "add", "path": "/metadata/labels", "value": {"team": "a"}},
        {
            "op": "replace",
            "path": "/spec/template/spec/containers",
            "value": [
                {"name": "app", "image": "web:2", "futureField": {"on": True}},
                {"name": "sidecar", "image": "proxy:1"},
            ],
        },
    ]


def test_removing_a_field_writes_an_explicit_null() -> None:
    raw = raw_thing(message="old", labels={"a": "b", "c": "d"})
    before, after = edit(raw)
    after.spec.message = None
    after.spec.labels = {"a": "b"}
    assert mutation_patch(raw, before, after) == [
        {"op": "remove", "path": "/spec/labels/c"},
        {"op": "replace", "path": "/spec/message", "value": None},
    ]


def test_replacing_a_sub_object_keeps_its_unknown_fields() -> None:
    raw = raw_thing(replicas=2)
    before, after = edit(raw)
    after.spec = Spec(replicas=4)
    patch = mutation_patch(raw, before, after)
    assert patch == [{"op": "replace", "path": "/spec/replicas", "value": 4}]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "other"}, "An admission mutator cannot change metadata.name"),
        ({"namespace": "other"}, "An admission mutator cannot change metadata.namespace"),
        ({"uid": "other"}, "An admission mutator cannot change metadata.uid"),
        ({"resource_version": "9"}, "cannot change metadata.resourceVersion"),
    ],
)
def test_mutation_identity_changes_are_refused(change: dict[str, str], message: str) -> None:
    raw = raw_thing()
    before, after = edit(raw)
    after.metadata = after.metadata.model_copy(update=change)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=message):
        mutation_patch(raw, before, after)


def test_mutation_type_changes_are_refused() -> None:
    raw = raw_thing()
    before, after = edit(raw)
    with pytest.raises(ValueError, match="cannot change apiVersion or kind"):
        mutation_patch(raw, before, after.model_copy(update={"kind": "Other"}))


@pytest.mark.parametrize(
    ("items", "change", "message"),
    [
        (
            [{"value": 1, "x": 1}, {"value": 1, "x": 2}],
            lambda items: items.pop(),
            "Cannot safely distinguish duplicate array elements",
        ),
        (
            [{"value": 1, "x": 1}, {"value": 2, "x": 2}],
            lambda items: items.__setitem__(slice(0, 2), [Item(value=5), Item(value=6)]),
            "Cannot safely match multiple changed unnamed array elements",
        ),
        (
            [{"value": 1, "x": 1}, {"value": 2}],
            lambda items: items.__setitem__(slice(0, 2), [Item(value=5), items[1], Item(value=9)]),
            "Cannot safely match changed array elements with unknown fields",
        ),
    ],
)
def test_ambiguous_unnamed_edits_raise(items: list[Any], change: Any, message: str) -> None:
    raw = raw_thing(items=items)
    before, after = edit(raw)
    change(after.spec.items)
    with pytest.raises(ValueError, match=message):
        mutation_patch(raw, before, after)


def test_renaming_a_named_element_with_unknown_fields_raises() -> None:
    raw = raw_thing(ports=[{"name": "http", "extra": 1}])
    before, after = edit(raw)
    after.spec.ports[0].name = "web"
    with pytest.raises(ValueError, match="Cannot safely replace named array elements"):
        mutation_patch(raw, before, after)


class Deduplicated(Spec):
    @field_validator("tags")
    @classmethod
    def _unique(cls, tags: list[str]) -> list[str]:
        return sorted(set(tags))


@custom_resource(api_version="example.com/v1", plural="dedups")
class Dedup(Resource):
    spec: Deduplicated = Field(default_factory=Deduplicated)


def test_validators_that_reshape_arrays_are_detected() -> None:
    raw = raw_thing(tags=["b", "a", "a"])
    raw["kind"] = "Dedup"
    before = Dedup.model_validate(raw)
    after = before.model_copy(deep=True)
    after.spec.tags = [*after.spec.tags, "c"]
    with pytest.raises(ValueError, match="A model validator changed array length"):
        mutation_patch(raw, before, after)
    raw["spec"]["tags"] = ["b", "a"]
    before = Dedup.model_validate(raw)
    after = before.model_copy(deep=True)
    after.spec.tags = [*after.spec.tags, "c"]
    with pytest.raises(ValueError, match="A model validator changed unnamed array elements"):
        mutation_patch(raw, before, after)


# -- mutation_patch properties ---------------------------------------------------------------

names = st.sampled_from(["a", "b", "c", "d", "e"])
maybe_unknown: st.SearchStrategy[dict[str, int]] = st.one_of(
    st.just({}), st.fixed_dictionaries({"extra": st.integers(0, 3)})
)


@st.composite
def raw_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["replicas"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        spec["message"] = draw(st.sampled_from(["x", "y"]))
    if draw(st.booleans()):
        port_names = draw(st.lists(names, unique=True, max_size=3))
        ports = []
        for name in port_names:
            port: dict[str, Any] = {"name": name, **draw(maybe_unknown)}
            if draw(st.booleans()):
                port["port"] = draw(st.integers(1, 3))
            ports.append(port)
        spec["ports"] = ports
    if draw(st.booleans()):
        spec["items"] = [
            {"value": draw(st.integers(0, 2)), **draw(maybe_unknown)}
            for _ in range(draw(st.integers(0, 3)))
        ]
    if draw(st.booleans()):
        spec["tags"] = draw(st.lists(names, max_size=3))
    if draw(st.booleans()):
        spec["future"] = draw(st.integers())
    return spec


ACTIONS = (
    "replicas",
    "message",
    "add-port",
    "drop-port",
    "edit-port",
    "add-item",
    "drop-item",
    "edit-item",
    "tags",
    "labels",
    "swap-items",
)


def _mutate(spec: Spec, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(0, 4))):
        action = data.draw(st.sampled_from(ACTIONS))
        if action == "replicas":
            spec.replicas = data.draw(st.integers(0, 3))
        elif action == "message":
            spec.message = data.draw(st.sampled_from([None, "x", "z"]))
        elif action == "add-port":
            taken = {port.name for port in spec.ports}
            name = data.draw(names)
            if name not in taken:
                spec.ports.append(Port(name=name, port=data.draw(st.integers(1, 3))))
        elif action == "drop-port" and spec.ports:
            del spec.ports[data.draw(st.integers(0, len(spec.ports) - 1))]
        elif action == "edit-port" and spec.ports:
            spec.ports[data.draw(st.integers(0, len(spec.ports) - 1))].port = data.draw(
                st.integers(1, 3)
            )
        elif action == "add-item":
            spec.items.append(Item(value=data.draw(st.integers(0, 2))))
        elif action == "drop-item" and spec.items:
            del spec.items[data.draw(st.integers(0, len(spec.items) - 1))]
        elif action == "edit-item" and spec.items:
            spec.items[data.draw(st.integers(0, len(spec.items) - 1))].value = data.draw(
                st.integers(0, 2)
            )
        elif action == "swap-items" and len(spec.items) > 1:
            spec.items.reverse()
        elif action == "tags":
            spec.tags = data.draw(st.lists(names, max_size=3))
        elif action == "labels":
            spec.labels = data.draw(st.none() | st.dictionaries(names, names, max_size=2))


def _containers(value: Any) -> set[int]:
    """The ids of every dict and list inside `value`."""
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            found.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


def _has_unknown_elements(spec: dict[str, Any]) -> bool:
    elements = [*spec.get("ports", []), *spec.get("items", [])]
    return any("extra" in element for element in elements)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(raw_specs(), st.data())
def test_mutation_patch_applies_exactly_the_handler_changes(
    spec: dict[str, Any], data: st.DataObject
) -> None:
    raw = raw_thing(**spec)
    received = copy.deepcopy(raw)
    before, after = edit(raw)
    base = MutationBase(before)  # as the webhook takes it, before the handler runs
    _mutate(after.spec, data)
    try:
        patch = mutation_patch(raw, before, after)
    except ValueError:
        # Refusing is allowed only where guessing could misplace unknown fields.
        assert _has_unknown_elements(raw["spec"])
        return
    assert mutation_patch(raw, base, after) == patch
    # raw is left alone, and the patch shares nothing with it (nor with later edits).
    assert raw == received
    assert not _containers(patch) & _containers(raw)
    result = apply_patch(raw, patch)
    assert typed(result) == after.model_dump(mode="json", by_alias=True)
    # Unmodeled fields survive everywhere they still have a home.
    assert result["unknownTop"] == raw["unknownTop"]
    assert result["metadata"] == raw["metadata"]
    assert result["spec"]["future"] == raw["spec"]["future"]
    raw_ports = {port["name"]: port for port in raw["spec"].get("ports", [])}
    for port in result["spec"].get("ports", []):
        if port["name"] in raw_ports and "extra" in raw_ports[port["name"]]:
            assert port["extra"] == raw_ports[port["name"]]["extra"]
    # An untouched model (same values, same explicitly set fields) means no patch.
    if all(
        after.model_dump(mode="json", by_alias=True, exclude_unset=unset)
        == before.model_dump(mode="json", by_alias=True, exclude_unset=unset)
        for unset in (False, True)
    ):
        assert patch == []


def test_diff_refuses_to_write_a_non_finite_number() -> None:
    document = {**raw_thing(items=[{"value": 1, "weight": 0.5}]), "metadata": {}}
    document["metadata"] = {"name": "t", "namespace": "ns", "uid": "u", "resourceVersion": "3"}
    before = Thing.model_validate(document)
    after = before.model_copy(deep=True)
    after.spec.items[0].weight = math.nan
    with pytest.raises(ValueError, match=r"/spec/items.*JSON cannot represent"):
        diff(before, after)


class _Limits(BaseModel):
    cpu: str = "1"
    extra: dict[str, str] = Field(default_factory=dict)


class _GadgetSpec(BaseModel):
    items: list[str] = Field(default_factory=list)
    limits: _Limits = Field(default_factory=_Limits)
    note: str | None = None


class _Gadget(Resource):
    api_version: str = Field(default="example.com/v1", alias="apiVersion")
    kind: str = "Gadget"
    spec: _GadgetSpec | None = None


STORED_GADGET = {
    "apiVersion": "example.com/v1",
    "kind": "Gadget",
    "metadata": {"name": "g", "namespace": "ns", "uid": "u-1", "resourceVersion": "7"},
    "spec": {"note": "n"},
}


def test_diff_writes_defaulted_members_the_server_lacks_whole() -> None:
    """Fields the model filled with defaults are not on the server: an edit of one (or of a
    member under one) must add it, or the server refuses the patch and the pass loops."""
    before = _Gadget.model_validate(STORED_GADGET)
    after = before.model_copy(deep=True)
    assert after.spec is not None
    after.spec.items.append("x")
    after.spec.limits.extra["gpu"] = "1"
    after.spec.note = None
    patch = diff(before, after)
    assert patch[2:] == [
        {"op": "add", "path": "/spec/items", "value": ["x"]},
        {"op": "add", "path": "/spec/limits", "value": {"cpu": "1", "extra": {"gpu": "1"}}},
        {"op": "remove", "path": "/spec/note"},
    ]
    result = apply_patch(STORED_GADGET, patch)  # the stored JSON, as the server has it
    assert result["spec"] == {"items": ["x"], "limits": {"cpu": "1", "extra": {"gpu": "1"}}}


def test_diff_writes_no_default_the_handler_did_not_change() -> None:
    before = _Gadget.model_validate(STORED_GADGET)
    after = before.model_copy(deep=True)
    assert after.spec is not None
    after.spec.note = "m"
    assert diff(before, after)[2:] == [{"op": "replace", "path": "/spec/note", "value": "m"}]
