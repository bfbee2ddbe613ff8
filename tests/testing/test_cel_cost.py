"""kube-apiserver's estimated CEL cost limits on CRD creation (beyond the recorded cases):
the per-rule limit, the multiplication by the lists a rule sits under, and the CRD total."""

from __future__ import annotations

from typing import Any

from cloudcoil_sync.testing._internal.cel_cost import cost_message, estimate, max_size
from cloudcoil_sync.testing._internal.cel_library import environment
from cloudcoil_sync.testing._internal.cel_rules import compile_rules

PREFIX = "spec.validation.openAPIV3Schema"
STRINGS = {"type": "array", "items": {"type": "string"}}
BOUNDED = {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 100}


def _errors(schema: dict[str, Any]) -> list[tuple[str, str, str]]:
    return compile_rules(schema, PREFIX).errors


def _with_rules(node: dict[str, Any], *rules: str) -> dict[str, Any]:
    return {**node, "x-kubernetes-validations": [{"rule": rule} for rule in rules]}


def test_a_quadratic_rule_over_an_unbounded_list_refuses_the_crd() -> None:
    rule = "self.all(x, self.exists(y, x == y))"
    errors = _errors({"type": "object", "properties": {"l": _with_rules(STRINGS, rule)}})
    where = f"{PREFIX}.properties[l].x-kubernetes-validations[0].rule"
    assert [(reason, path) for reason, path, _ in errors] == [
        ("FieldValueForbidden", where),
        ("FieldValueForbidden", where),
        ("FieldValueForbidden", PREFIX),
    ]
    assert errors[0][2].startswith(
        "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try"
    )
    assert "contributed to estimated rule cost total" in errors[1][2]


def test_bounds_make_the_same_rule_cheap_enough() -> None:
    rule = "self.all(x, self.exists(y, x == y))"
    assert _errors({"type": "object", "properties": {"l": _with_rules(BOUNDED, rule)}}) == []


def test_a_rule_costs_as_often_as_its_node_can_occur() -> None:
    inner = {"type": "object", "properties": {"tags": BOUNDED}}
    rule = "self.tags.all(x, self.tags.exists(y, x == y))"
    alone = {"type": "object", "properties": {"one": _with_rules(inner, rule)}}
    listed = {"type": "array", "items": _with_rules(inner, rule)}
    assert _errors(alone) == []
    assert _errors({"type": "object", "properties": {"many": listed}}) != []


def test_cheap_rules_adding_up_over_the_total_limit_refuse_the_crd() -> None:
    rule = "self.all(x, x.size() < 10 && x.size() > 1)"  # about 9.4 million each
    cost = estimate(environment("dyn").compile(rule).serialize(), STRINGS, False)
    assert 1_000_000 < cost < 10_000_000
    props = {f"l{i}": _with_rules(STRINGS, rule) for i in range(12)}
    errors = _errors({"type": "object", "properties": props})
    assert [path for _, path, _ in errors][-1] == PREFIX
    assert len(errors) == 5  # the four most expensive rules, then the total
    assert "exceeds budget by factor of 1." in errors[-1][2]


def test_cost_messages_and_sizes_follow_kube_apiserver() -> None:
    assert "by factor of 2.5x (try simplifying" in cost_message("estimated rule cost", 25, 10)
    assert cost_message("x", 10, 10).startswith("x exceeds budget (try")
    assert max_size(STRINGS) == (3 * 1024 * 1024 - 2) // 3
    assert max_size({"type": "string", "maxLength": 7}) == 7


def test_formatted_strings_are_bounded_by_their_json_size() -> None:
    # kube-apiserver 1.32 accepts this CRD (recorded by hand on 2026-12-06): a date-time is at
    # least 22 bytes in JSON, so fewer fit in a request than plain strings.
    times = {"type": "array", "items": {"type": "string", "format": "date-time"}}
    node = {
        "type": "object",
        "properties": {"when": {"type": "string", "format": "date-time"}, "times": times},
    }
    rule = "self.when > timestamp('2000-01-01T00:00:00Z') && self.times.all(t, t < self.when)"
    assert _errors(_with_rules(node, rule)) == []
    assert max_size(times) == (3 * 1024 * 1024 - 2) // 23
