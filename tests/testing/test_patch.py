"""The emulator's JSON patch applier: copy on write, never changing the stored object."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudcoil_sync._internal.patches import json_diff
from cloudcoil_sync.testing._internal.patch import PatchError, apply_json_patch

# -- a reference applier: deep copy, then mutate in place (what the emulator did before) ----


def _tokens(path: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]] if path else []


def _walk(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def _reference(doc: Any, ops: list[dict[str, Any]]) -> Any:
    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = _tokens(op["path"])
        if op["op"] == "test":
            if _walk(doc, tokens) != op["value"]:
                raise PatchError("test")
            continue
        value = copy.deepcopy(
            _walk(doc, _tokens(op["from"])) if op["op"] in ("move", "copy") else op.get("value")
        )
        if op["op"] in ("remove", "replace", "move"):
            gone = _tokens(op["from"]) if op["op"] == "move" else tokens
            parent = _walk(doc, gone[:-1])
            del parent[int(gone[-1]) if isinstance(parent, list) else gone[-1]]
        if op["op"] != "remove":
            if not tokens:
                doc = value
                continue
            parent = _walk(doc, tokens[:-1])
            if isinstance(parent, list):
                last = tokens[-1]
                parent.insert(len(parent) if last == "-" else int(last), value)
            else:
                parent[tokens[-1]] = value
    return doc


def _paths(doc: Any, prefix: str = "") -> list[str]:
    """Every pointer into ``doc`` (containers and leaves), the root excluded."""
    out: list[str] = []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for key, value in items:
        path = f"{prefix}/{str(key).replace('~', '~0').replace('/', '~1')}"
        out.append(path)
        out.extend(_paths(value, path))
    return out


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="ab~/", max_size=2),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet="ab~/", max_size=2), children, max_size=3)
    ),
    max_leaves=10,
)
documents = st.dictionaries(st.text(alphabet="ab", max_size=2), json_values, max_size=4)


@st.composite
def patched(draw: st.DrawFn) -> tuple[Any, list[dict[str, Any]]]:
    """A document and valid operations on it (each drawn against the state so far)."""
    doc = draw(documents)
    state, ops = copy.deepcopy(doc), []
    for _ in range(draw(st.integers(1, 6))):
        paths = _paths(state)
        kind = draw(st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]))
        if kind != "add" and not paths:
            kind = "add"
        if kind == "add":
            parents = [""] + [p for p in paths if isinstance(_walk(state, _tokens(p)), dict)]
            op = {
                "op": kind,
                "path": draw(st.sampled_from(parents)) + "/" + draw(st.text("ab")),
                "value": draw(json_values),
            }
        elif kind in ("move", "copy"):
            source = draw(st.sampled_from(paths))
            targets = [p for p in ["", *paths] if isinstance(_walk(state, _tokens(p)), dict)]
            targets = [t for t in targets if not (t + "/").startswith(source + "/")]
            if not targets:
                continue
            op = {"op": kind, "from": source, "path": draw(st.sampled_from(targets)) + "/n"}
        else:
            path = draw(st.sampled_from(paths))
            op = {"op": kind, "path": path}
            if kind == "replace":
                op["value"] = draw(json_values)
            if kind == "test":
                op["value"] = _walk(state, _tokens(path))
        try:
            state = _reference(state, [op])
        except (IndexError, KeyError, TypeError, ValueError):
            # A move whose target was a later element of the list its source left: the
            # target no longer exists once the source is removed (RFC 6902), or is now the
            # next element, which may be no object (TypeError) or a list ("n" is no index:
            # ValueError), so no such op.
            continue
        ops.append(op)
    return doc, ops


@given(patched())
def test_same_result_as_deep_copy_and_the_original_is_untouched(case: Any) -> None:
    doc, ops = case
    before = copy.deepcopy(doc)
    assert apply_json_patch(doc, ops) == _reference(doc, ops)
    assert doc == before


@given(documents, documents)
def test_the_products_own_patches_apply(before: Any, after: Any) -> None:
    kept = copy.deepcopy(before)
    assert apply_json_patch(before, json_diff(before, after)) == after
    assert before == kept


def test_only_the_written_path_is_copied() -> None:
    doc = {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}, "big": [{}]}
    out = apply_json_patch(doc, [{"op": "add", "path": "/metadata/labels/y", "value": "2"}])
    assert out["metadata"]["labels"] == {"x": "1", "y": "2"}
    assert doc["metadata"]["labels"] == {"x": "1"}
    assert out["data"] is doc["data"] and out["big"] is doc["big"]  # shared, not copied


def test_a_failed_test_leaves_the_original_unchanged() -> None:
    doc = {"metadata": {"resourceVersion": "5"}, "data": {"k": "v"}}
    ops = [
        {"op": "replace", "path": "/data/k", "value": "w"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "4"},
    ]
    with pytest.raises(PatchError) as failed:
        apply_json_patch(doc, ops)
    assert failed.value.why == "test failed at '/metadata/resourceVersion'"
    assert doc == {"metadata": {"resourceVersion": "5"}, "data": {"k": "v"}}


def test_several_writes_into_one_container() -> None:
    doc = {"a": {"b": {"c": 1}}}
    out = apply_json_patch(
        doc,
        [
            {"op": "add", "path": "/a/b/d", "value": 2},
            {"op": "add", "path": "/a/b/e", "value": 3},
            {"op": "remove", "path": "/a/b/c"},
        ],
    )
    assert out == {"a": {"b": {"d": 2, "e": 3}}}
    assert doc == {"a": {"b": {"c": 1}}}
