"""``x-kubernetes-validations`` (CEL rules) of a CRD schema, compiled once and evaluated on
every write as kube-apiserver 1.32 does.

Rules are compiled when the CRD is created or changed: one that does not compile (or a bad
``reason``) refuses the CRD with kube-apiserver's cause path. On a write each rule runs with
``self`` bound to the value at its node (and ``oldSelf`` to the stored value for transition
rules, which are skipped on create and where the old value is absent); a failure is reported
at the node's path (or ``fieldPath``) with ``message``, ``messageExpression`` or
``failed rule: <rule>``, as the rule's ``reason``. Rules are type-checked with ``self`` and
``oldSelf`` typed by the schema (``cel_types.py``; ``cel_fields.py`` catches undeclared fields
should protobuf be missing) and evaluated on the JSON values, where a ``date-time`` or
``duration`` string at the node itself is a timestamp or duration. A CRD whose rules' estimated
cost exceeds kube-apiserver's limits is refused (``cel_cost.py``); no cost budget is applied
when rules run.
"""

from __future__ import annotations

import datetime
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from cloudcoil_sync.testing._internal.cel_cost import (
    PER_RULE_LIMIT,
    TOTAL_LIMIT,
    cost_message,
    estimate,
    max_size,
)
from cloudcoil_sync.testing._internal.cel_fields import undeclared_field
from cloudcoil_sync.testing._internal.cel_library import CelUnavailable, environment, error_text
from cloudcoil_sync.testing._internal.cel_types import type_error
from cloudcoil_sync.testing._internal.schema_validation import Cause, json_type, property_schema

__all__ = ["CelUnavailable", "CompiledRules", "compile_rules"]

JSON = dict[str, Any]
_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
_CONTRIBUTED = (
    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
)
_POINTER = "0xc000a1b2c3"  # kube-apiserver prints the address of the bool (random)
_OPTIONAL_OLD = "Invalid value: true: may not be set if oldSelf is not used in rule"
_OLD_SELF = re.compile(r"\boldSelf\b")
_MISSING = object()
_eval_lock = threading.Lock()  # one evaluation at a time: the bindings' thread safety is unstated


@dataclass(frozen=True)
class Rule:
    rule: str
    program: Any
    message: str
    message_program: Any
    reason: str
    field_path: str
    transition: bool
    optional_old: bool = False  # optionalOldSelf: also runs without an old value
    plain: Any = None  # the rule as written, compiled (program may wrap it): for its cost


@dataclass
class CompiledRules:
    """The compiled rules of one schema, by schema node (nodes are kept alive by ``schema``)."""

    schema: JSON
    by_node: dict[int, list[Rule]] = field(default_factory=dict)
    below: set[int] = field(default_factory=set)  # nodes with a rule at or under them
    errors: list[Cause] = field(default_factory=list)  # for the CRD's own validation
    costs: list[tuple[int, str]] = field(default_factory=list)  # estimated cost, rule path

    def evaluate(self, node: JSON, value: Any, old: Any, path: str) -> list[Cause]:
        """Causes of the rules failing at and under ``node`` (``old``: the stored value, or
        ``None`` on create)."""
        out: list[Cause] = []
        _walk(self, node, value, _MISSING if old is None else old, path, True, out)
        return out


def compile_rules(schema: JSON, prefix: str) -> CompiledRules:
    """Compile every rule of ``schema``; ``prefix`` is the CRD field path of the schema."""
    compiled = CompiledRules(schema)
    _compile_node(compiled, schema, prefix, 1)
    total = sum(cost for cost, _ in compiled.costs)
    if total > TOTAL_LIMIT:
        big = [item for item in compiled.costs if item[0] >= TOTAL_LIMIT // 100]  # kube: >= 1 %
        for _, path in sorted(big, key=lambda item: -item[0])[:4]:
            compiled.errors.append(("FieldValueForbidden", path, f"Forbidden: {_CONTRIBUTED}"))
        what = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema"
        message = f"Forbidden: {cost_message(what, total, TOTAL_LIMIT)}"
        compiled.errors.append(("FieldValueForbidden", prefix, message))
    return compiled


def _compile_node(compiled: CompiledRules, node: JSON, path: str, cardinality: int) -> bool:
    """``cardinality``: how many times ``node`` can occur in one object (kube's estimate)."""
    has = False
    for key, child in (node.get("properties") or {}).items():
        has |= _compile_node(compiled, child, f"{path}.properties[{key}]", cardinality)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            below = cardinality * max_size(node)
            has |= _compile_node(compiled, node[key], f"{path}.{key}", below)
    rules = node.get("x-kubernetes-validations") or []
    root = node is compiled.schema
    for i, entry in enumerate(rules):
        where = f"{path}.x-kubernetes-validations[{i}]"
        rule = _compile_rule(compiled, entry, where, node, root)
        if rule is not None:
            compiled.by_node.setdefault(id(node), []).append(rule)
            _check_cost(compiled, rule, node, root, cardinality, f"{where}.rule")
    if rules or has:
        compiled.below.add(id(node))
    return bool(rules) or has


def _check_cost(
    compiled: CompiledRules, rule: Rule, node: JSON, root: bool, cardinality: int, path: str
) -> None:
    cost = estimate(rule.plain.serialize(), node, root) * cardinality
    compiled.costs.append((cost, path))
    if cost > PER_RULE_LIMIT:
        message = f"Forbidden: {cost_message('estimated rule cost', cost, PER_RULE_LIMIT)}"
        compiled.errors.append(("FieldValueForbidden", path, message))


def _go_rule(entry: JSON) -> str:
    reason = entry.get("reason")
    reason_text = "(*apiextensions.FieldValueErrorReason)(nil)" if reason is None else f'"{reason}"'
    return (
        f"apiextensions.ValidationRule{{Rule:{json.dumps(entry.get('rule', ''))}, "
        f"Message:{json.dumps(entry.get('message', ''))}, "
        f"MessageExpression:{json.dumps(entry.get('messageExpression', ''))}, "
        f"Reason:{reason_text}, FieldPath:{json.dumps(entry.get('fieldPath', ''))}, "
        f"OptionalOldSelf:(*bool)({'nil' if entry.get('optionalOldSelf') is None else _POINTER})}}"
    )


def _compile(env: Any, text: str) -> tuple[Any, str]:
    try:
        return env.compile(text), ""
    except RuntimeError as exc:
        return None, str(exc).removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")


def _compile_rule(
    compiled: CompiledRules, entry: JSON, path: str, node: JSON, root: bool
) -> Rule | None:
    kind = {"date-time": "timestamp", "duration": "duration"}.get(node.get("format") or "")
    env = environment(kind or "dyn")
    reason = entry.get("reason") or "FieldValueInvalid"
    if reason not in _REASONS:
        allowed = ", ".join(f'"{r}"' for r in _REASONS)
        message = f'Unsupported value: "{reason}": supported values: {allowed}'
        compiled.errors.append(("FieldValueNotSupported", f"{path}.reason", message))
        return None
    text, optional = str(entry.get("rule", "")), entry.get("optionalOldSelf") is True
    program, error = _compile(env, text)
    error = error or type_error(node, root, text, optional)
    error = error or undeclared_field(node, text, root)
    if error:
        message = f"Invalid value: {_go_rule(entry)}: compilation failed: {error}"
        compiled.errors.append(("FieldValueInvalid", f"{path}.rule", message))
    if optional and (error or not _OLD_SELF.search(text)):
        compiled.errors.append(("FieldValueInvalid", f"{path}.optionalOldSelf", _OPTIONAL_OLD))
        return None
    if error:
        return None
    message_program = None
    if entry.get("messageExpression"):
        message_program, error = _compile(env, entry["messageExpression"])
        error = error or type_error(node, root, entry["messageExpression"])
        if error:
            message = (
                f"Invalid value: {_go_rule(entry)}: messageExpression compilation failed: {error}"
            )
            compiled.errors.append(("FieldValueInvalid", f"{path}.messageExpression", message))
            return None
    transition = bool(_OLD_SELF.search(entry["rule"]))
    plain = program
    if optional:  # oldSelf: an optional value, none where there is no old value
        program = _optional_old(text)
        message_program = message_program and _optional_old(entry["messageExpression"])
    return Rule(
        entry["rule"],
        program,
        entry.get("message") or "",
        message_program,
        reason,
        entry.get("fieldPath") or "",
        transition,
        optional,
        plain,
    )


def _optional_old(text: str) -> Any:
    """``text`` compiled with ``oldSelf`` bound to ``optional.of(__old)`` or ``optional.none()``
    (cel-expr-python takes no optional value as a variable)."""
    bound = f"cel.bind(oldSelf, __hasOld ? optional.of(__old) : optional.none(), ({text}))"
    return environment("optional-old").compile(bound)


def _walk(
    compiled: CompiledRules,
    node: JSON,
    value: Any,
    old: Any,
    path: str,
    root: bool,
    out: list[Cause],
) -> None:
    if id(node) not in compiled.below or value is None:
        return
    unchanged = old is not _MISSING and old == value  # ratcheting: kube skips such rules
    for rule in compiled.by_node.get(id(node), ()):
        if rule.transition and old is _MISSING and not rule.optional_old:
            continue
        if unchanged and not rule.transition:
            continue
        out.extend(_run(rule, node, _bound(node, value, root), _bound(node, old, root), path))
    if isinstance(value, dict):
        for key, child in value.items():
            sub = property_schema(node, key)
            if isinstance(sub, dict):
                was = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                _walk(compiled, sub, child, was, f"{path}.{key}" if path else key, False, out)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            was = _correlated(node, item, old)
            _walk(compiled, node["items"], item, was, f"{path}[{i}]", False, out)


def _correlated(node: JSON, item: Any, old: Any) -> Any:
    """The old element of a set or map list that an element corresponds to (kube's rules)."""
    if not isinstance(old, list):
        return _MISSING
    kind = node.get("x-kubernetes-list-type")
    if kind == "set":
        return item if item in old else _MISSING
    if kind == "map" and isinstance(item, dict):
        keys = node.get("x-kubernetes-list-map-keys") or []
        for element in old:
            if isinstance(element, dict) and all(element.get(k) == item.get(k) for k in keys):
                return element
    return _MISSING


def _bound(node: JSON, value: Any, root: bool) -> Any:
    """The CEL value of a JSON value: root and embedded objects show only name/generateName
    of their metadata; date-time and duration strings at a typed node are converted."""
    if value is _MISSING:
        return None
    if isinstance(value, dict) and (root or node.get("x-kubernetes-embedded-resource")):
        meta = value.get("metadata") or {}
        kept = {k: meta[k] for k in ("name", "generateName") if k in meta}
        return {**value, "metadata": kept}
    if isinstance(value, str) and node.get("format") == "date-time":
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def _run(rule: Rule, node: JSON, value: Any, old: Any, path: str) -> list[Cause]:
    data = {"self": value} if old is None else {"self": value, "oldSelf": old}
    if rule.optional_old:
        data = {"self": value, "__old": old, "__hasOld": old is not None}
    with _eval_lock:
        result = rule.program.eval(data=data)
        ok, error = _outcome(result)
    where = (path + rule.field_path if rule.field_path else path).lstrip(".") or "<nil>"
    shown = json.dumps(json_type(value) if not isinstance(value, datetime.datetime) else "string")
    error = error or _typed_data_error(node, value, rule.rule)
    if error:  # reported at the rule's node, not its fieldPath
        text = f"Invalid value: {shown}: {error} evaluating rule: {rule.rule}"
        return [("FieldValueInvalid", path.lstrip(".") or "<nil>", text)]
    if ok:
        return []
    text = _message(rule, data)
    if rule.reason == "FieldValueForbidden":
        return [(rule.reason, where, f"Forbidden: {text}")]
    if rule.reason == "FieldValueRequired":
        return [(rule.reason, where, f"Required value: {text}")]
    if rule.reason == "FieldValueDuplicate":
        return [(rule.reason, where, f"Duplicate value: {shown}")]
    return [(rule.reason, where, f"Invalid value: {shown}: {text}")]


def _typed_data_error(node: JSON, value: Any, rule: str) -> str:
    """kube-apiserver's CEL values are typed by the schema: an integer field holding a JSON
    float (``5.0``) fails the rule that reads it (``self`` or ``self.<field>``)."""
    read: list[tuple[JSON, Any]] = [(node, value)]
    if isinstance(value, dict):
        for key, child in (node.get("properties") or {}).items():
            if key in value and re.search(rf"\bself\.{re.escape(key)}\b", rule):
                read.append((child, value[key]))
    for child, item in read:
        if child.get("type") == "integer" and isinstance(item, float):
            return "invalid data, expected int, got float64"
    return ""


def _outcome(result: Any) -> tuple[bool, str]:
    value = result.plain_value()
    if result.type().name() == "ERROR":
        return False, error_text(str(value))
    if value is True or value is False:
        return value, ""
    return False, f"rule did not evaluate to a bool but to {value!r}"


def _message(rule: Rule, data: JSON) -> str:
    if rule.message_program is not None:
        with _eval_lock:
            result = rule.message_program.eval(data=data)
        text = result.plain_value()
        if result.type().name() == "STRING" and isinstance(text, str) and text.strip():
            return text
    return rule.message or f"failed rule: {rule.rule}"
