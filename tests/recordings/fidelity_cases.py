"""The request cases of the differential suite (``bench/fidelity.py``), in sending order.

Two CRDs: the Widget of ``examples/widget_operator.py`` (its manifest is passed in, so this
module needs nothing outside tests/) and ``gadgets.fid39.example.com``, which uses every
structural-schema feature and CEL rule the emulator validates. Cases share one namespace and
run in order: later ones update what earlier ones created.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["GROUP", "NS", "Case", "cases", "gadget_crd"]

JSON = dict[str, Any]
Case = dict[str, Any]
GROUP = "fid39.example.com"
NS = "fid39"
MERGE = "application/merge-patch+json"
JSONP = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def _s(**kw: Any) -> JSON:
    return {"type": "string", **kw}


def _i(**kw: Any) -> JSON:
    return {"type": "integer", **kw}


def _spec_schema() -> JSON:
    port = {"type": "object", "required": ["name"], "properties": {"name": _s(), "port": _i()}}
    return {
        "type": "object",
        "required": ["name", "size"],
        "properties": {
            "name": _s(minLength=2, maxLength=10, pattern="^[a-z]+$"),
            "size": _i(minimum=1, maximum=100),
            "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1},
            "step": _i(multipleOf=5, exclusiveMaximum=True, maximum=50),
            "mode": _s(enum=["fast", "slow"], default="fast"),
            "count": _i(format="int32", default=3),
            "port": {"x-kubernetes-int-or-string": True},
            "note": _s(nullable=True),
            "plain": _s(),
            "flag": {"type": "boolean"},
            "when": _s(format="date-time"),
            "day": _s(format="date"),
            "blob": _s(format="byte"),
            "id": _s(format="uuid"),
            "addr": _s(format="ipv4"),
            "tags": {
                "type": "array",
                "items": _s(maxLength=5),
                "maxItems": 3,
                "x-kubernetes-list-type": "set",
            },
            "ports": {
                "type": "array",
                "items": port,
                "minItems": 1,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "labels": {
                "type": "object",
                "additionalProperties": _s(),
                "maxProperties": 2,
                "minProperties": 1,
            },
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
            },
            "nested": {
                "type": "object",
                "default": {},
                "properties": {"a": _s(default="x"), "b": _i(default=7), "c": _s()},
            },
            "secret": _s(maxLength=10),
            "immutable": _s(**_rules(("self == oldSelf", "immutable is immutable"))),
            "cel": _cel_schema(),
        },
        **_rules(
            ("self.name != 'forbidden'", None),
            ("!has(self.secret)", "secret is not allowed", {"reason": "FieldValueForbidden"}),
            ("self.size >= 1", None, {"fieldPath": ".size"}),
        ),
    }


def _rules(*rules: tuple[Any, ...]) -> JSON:
    """``x-kubernetes-validations`` from (rule, message or None[, extra fields]) tuples."""
    out = []
    for rule, message, *extra in rules:
        entry: JSON = {"rule": rule}
        if message is not None:
            entry["message"] = message
        for more in extra:
            entry.update(more)
        out.append(entry)
    return {"x-kubernetes-validations": out}


def _cel_schema() -> JSON:
    """An object whose every field carries CEL rules (about 20 in all)."""
    strings = {"type": "array", "items": _s(maxLength=10), "maxItems": 10}
    props = {
        "low": _i(),
        "high": _i(),
        "start": _s(maxLength=20, **_rules(("self.indexOf('x') < 0", "start may not contain x"))),
        "words": {
            **strings,
            **_rules(("self.all(w, w == w.lowerAscii())", "words must be lowercase")),
        },
        "nums": {
            "type": "array",
            "items": _i(),
            "maxItems": 10,
            **_rules(("self.isSorted()", "nums must be sorted"), ("self.sum() <= 100", None)),
        },
        "host": _s(maxLength=50, **_rules(("self.matches('^[a-z.]+$')", None))),
        "when": _s(
            format="date-time", **_rules(("self > timestamp('2000-01-01T00:00:00Z')", "too old"))
        ),
        "ttl": _s(maxLength=10, **_rules(("duration(self) < duration('24h')", "ttl under a day"))),
        "parts": _s(maxLength=30, **_rules(("self.split('-').size() <= 3", "at most 3 parts"))),
        "opt": _s(maxLength=5),
        "version": _i(**_rules(("self >= oldSelf", "version may not decrease"))),
        "mem": _s(
            maxLength=10,
            **_rules(
                ("isQuantity(self) && quantity(self).isLessThan(quantity('1Gi'))", "mem < 1Gi")
            ),
        ),
        "link": _s(maxLength=40, **_rules(("isURL(self) && self.startsWith('https')", None))),
        "sets": {
            "type": "array",
            "items": _s(maxLength=5),
            "maxItems": 5,
            **_rules(("sets.contains(['a', 'b', 'c'], self)", "sets only of a, b, c")),
        },
        "dims": {
            "type": "object",
            "additionalProperties": _i(),
            "maxProperties": 5,
            **_rules(("self.all(k, k.startsWith('d'))", "dims keys start with d")),
        },
    }
    return {
        "type": "object",
        "properties": props,
        **_rules(
            ("!has(self.low) || !has(self.high) || self.low <= self.high", "low must be <= high"),
            (
                "!has(self.start) || self.start.startsWith('s')",
                None,
                {"messageExpression": "'start must begin with s, got ' + self.start"},
            ),
            ("self.?opt.orValue('') != 'bad'", "opt may not be bad", {"fieldPath": ".opt"}),
            (
                "!has(self.low) || self.low >= 0",
                "low is negative",
                {"reason": "FieldValueRequired", "fieldPath": ".low"},
            ),
            ("!has(self.dims) || self.dims.size() <= 3", "too many dims"),
            (
                "!has(self.high) || self.high < 1000",
                None,
                {
                    "messageExpression": "'high must be under ' + '1000'",
                    "reason": "FieldValueDuplicate",
                },
            ),
        ),
    }


def gadget_crd() -> JSON:
    status = {
        "type": "object",
        "properties": {"phase": _s(enum=["Ready", "Pending"]), "replicas": _i(minimum=0)},
    }
    schema = {
        "type": "object",
        "properties": {"spec": _spec_schema(), "status": status},
        **_rules(("self.metadata.name != 'evil'", "evil names are refused")),
    }
    scale = {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.replicas"}
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "subresources": {"status": {}, "scale": scale},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [version],
        },
    }


def _path(plural: str, group: str, version: str, name: str = "", sub: str = "") -> str:
    path = f"/apis/{group}/{version}/namespaces/{NS}/{plural}"
    return path + "".join(f"/{p}" for p in (name, sub) if p)


def _g(name: str = "", sub: str = "") -> str:
    return _path("gadgets", GROUP, "v1", name, sub)


def _gadget(obj_name: str, **spec: Any) -> JSON:
    body: JSON = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": obj_name}}
    body["spec"] = {"name": "abc", "size": 5, **spec}
    return body


def _case(name: str, method: str, path: str, body: Any = None, **kw: Any) -> Case:
    return {"name": name, "method": method, "path": path, "body": body, **kw}


def _put(name: str, path: str, obj: JSON, **kw: Any) -> Case:
    return _case(name, "PUT", path, obj, fresh_rv=path.removesuffix("/status"), **kw)


def _create(name: str, obj: JSON, **kw: Any) -> Case:
    return _case(name, "POST", _g(), obj, **kw)


def _invalid_specs() -> list[tuple[str, JSON]]:
    """One invalid value per rule, each created as its own object."""
    return [
        ("name-too-short", {"name": "a"}),
        ("name-too-long", {"name": "abcdefghijk"}),
        ("name-pattern", {"name": "ab1"}),
        ("name-wrong-type", {"name": 12}),
        ("size-below-min", {"size": 0}),
        ("size-above-max", {"size": 101}),
        ("size-not-integer", {"size": 1.5}),
        ("size-string", {"size": "5"}),
        ("ratio-exclusive-min", {"ratio": 0}),
        ("ratio-above-max", {"ratio": 1.5}),
        ("step-multiple", {"step": 7}),
        ("step-exclusive-max", {"step": 50}),
        ("mode-enum", {"mode": "medium"}),
        ("count-int32-range", {"count": 3000000000}),
        ("port-bool", {"port": True}),
        ("port-object", {"port": {"a": 1}}),
        ("plain-null", {"plain": None}),
        ("flag-string", {"flag": "yes"}),
        ("when-format", {"when": "yesterday"}),
        ("day-format", {"day": "2024-13-01"}),
        ("blob-format", {"blob": "!!!"}),
        ("id-format", {"id": "not-a-uuid"}),
        ("addr-format", {"addr": "300.1.1.1"}),
        ("tags-too-many", {"tags": ["a", "b", "c", "d"]}),
        ("tags-duplicate", {"tags": ["a", "a"]}),
        ("tags-item-too-long", {"tags": ["abcdef"]}),
        ("tags-not-array", {"tags": "a"}),
        ("ports-empty", {"ports": []}),
        ("ports-duplicate-key", {"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}),
        ("ports-missing-key", {"ports": [{"port": 1}]}),
        ("labels-too-many", {"labels": {"a": "1", "b": "2", "c": "3"}}),
        ("labels-empty", {"labels": {}}),
        ("labels-value-type", {"labels": {"a": 1}}),
        ("template-no-kind", {"template": {"apiVersion": "v1", "metadata": {"name": "x"}}}),
        (
            "template-bad-name",
            {"template": {"apiVersion": "v1", "kind": "X", "metadata": {"name": "A_B"}}},
        ),
        ("nested-wrong-type", {"nested": "x"}),
        ("two-errors", {"name": "a", "size": 0}),
        ("three-errors", {"mode": "x", "tags": ["a", "a"], "ratio": 2}),
    ]


def _valid_creates() -> list[Case]:
    full = _gadget(
        "full",
        ratio=0.5,
        step=45,
        mode="slow",
        count=10,
        port="http",
        note=None,
        flag=True,
        when="2024-01-02T03:04:05Z",
        day="2024-02-29",
        blob="aGVsbG8=",
        id="123e4567-e89b-12d3-a456-426614174000",
        addr="10.0.0.1",
        tags=["a", "b"],
        ports=[{"name": "http", "port": 80}, {"name": "https", "port": 443}],
        labels={"a": "1"},
        extra={"anything": {"deep": [1, "two"]}},
        template={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "t"},
            "data": {"k": "v"},
        },
        nested={"c": "set"},
    )
    unknown = _gadget("unknown", bogus=1, nested={"zz": 1, "a": "y"})
    unknown["topLevelBogus"] = True
    unknown["metadata"]["bogusMeta"] = "x"
    withstatus = _gadget("withstatus")
    withstatus["status"] = {"phase": "Ready", "replicas": 3}
    return [
        _create("create-minimal", _gadget("minimal")),
        _create("create-full", full),
        _create("create-port-int", _gadget("portint", port=8080)),
        _create("create-unknown-ignore", unknown, query={"fieldValidation": "Ignore"}),
        _create(
            "create-unknown-warn",
            {**unknown, "metadata": {"name": "unknownwarn"}},
            query={"fieldValidation": "Warn"},
        ),
        _create(
            "create-unknown-strict",
            {**unknown, "metadata": {"name": "unknownstrict"}},
            query={"fieldValidation": "Strict"},
        ),
        _create("create-unknown-default", {**unknown, "metadata": {"name": "unknowndefault"}}),
        _create("create-status-dropped", withstatus),
        _create("create-defaults-null-nested", _gadget("nullnested", nested=None)),
        _create(
            "create-missing-spec",
            {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "nospec"}},
        ),
        _create("create-missing-required", {**_gadget("noreq"), "spec": {"size": 1}}),
        _create("create-bad-name", _gadget("Bad_Name")),
        _create("create-long-name", _gadget("x" * 254)),
        _create("create-dry-run-invalid", _gadget("dry", size=0), query={"dryRun": "All"}),
        _create("create-dry-run-defaults", _gadget("dry"), query={"dryRun": "All"}),
        _create("create-generate-name", {**_gadget(""), "metadata": {"generateName": "gen-"}}),
        _create("create-float-integer", _gadget("floatint", size=5.0)),
        _create("create-big-int64", _gadget("bigint", size=5, extra={"n": 12345678901234567})),
    ]


def _updates() -> list[Case]:
    m = _g("minimal")
    return [
        _case("get-minimal-defaulted", "GET", m),
        _case("merge-valid", "PATCH", m, {"spec": {"size": 6}}, ctype=MERGE),
        _case("merge-invalid-size", "PATCH", m, {"spec": {"size": 500}}, ctype=MERGE),
        _case("merge-delete-required", "PATCH", m, {"spec": {"name": None}}, ctype=MERGE),
        _case(
            "merge-unknown-strict",
            "PATCH",
            m,
            {"spec": {"bogus": 1}},
            ctype=MERGE,
            query={"fieldValidation": "Strict"},
        ),
        _case(
            "merge-unknown-warn",
            "PATCH",
            m,
            {"spec": {"bogus": 1}},
            ctype=MERGE,
            query={"fieldValidation": "Warn"},
        ),
        _case("merge-null-nested-defaults", "PATCH", m, {"spec": {"nested": None}}, ctype=MERGE),
        _case("merge-mode-null-defaults", "PATCH", m, {"spec": {"mode": None}}, ctype=MERGE),
        _case("merge-status-on-main", "PATCH", m, {"status": {"phase": "Ready"}}, ctype=MERGE),
        _case(
            "merge-status-invalid-on-main", "PATCH", m, {"status": {"phase": "Bogus"}}, ctype=MERGE
        ),
        _case(
            "merge-status-valid",
            "PATCH",
            m + "/status",
            {"status": {"phase": "Ready", "replicas": 2}},
            ctype=MERGE,
        ),
        _case(
            "merge-status-invalid",
            "PATCH",
            m + "/status",
            {"status": {"phase": "Bogus"}},
            ctype=MERGE,
        ),
        _case(
            "merge-status-negative",
            "PATCH",
            m + "/status",
            {"status": {"replicas": -1}},
            ctype=MERGE,
        ),
        _case(
            "merge-status-with-invalid-spec",
            "PATCH",
            m + "/status",
            {"spec": {"size": 0}, "status": {"phase": "Pending"}},
            ctype=MERGE,
        ),
        _case(
            "merge-status-unknown-strict",
            "PATCH",
            m + "/status",
            {"status": {"bogus": 1}},
            ctype=MERGE,
            query={"fieldValidation": "Strict"},
        ),
        _case(
            "json-patch-valid",
            "PATCH",
            m,
            [{"op": "replace", "path": "/spec/size", "value": 7}],
            ctype=JSONP,
        ),
        _case(
            "json-patch-invalid",
            "PATCH",
            m,
            [{"op": "replace", "path": "/spec/mode", "value": "x"}],
            ctype=JSONP,
        ),
        _case(
            "json-patch-remove-required",
            "PATCH",
            m,
            [{"op": "remove", "path": "/spec/size"}],
            ctype=JSONP,
        ),
        _case(
            "json-patch-add-tag-dup",
            "PATCH",
            m,
            [{"op": "add", "path": "/spec/tags", "value": ["q", "q"]}],
            ctype=JSONP,
        ),
        _case(
            "json-patch-unknown",
            "PATCH",
            m,
            [{"op": "add", "path": "/spec/zzz", "value": 1}],
            ctype=JSONP,
            query={"fieldValidation": "Strict"},
        ),
        _case("get-minimal-after-patches", "GET", m),
        _case("put-invalid", "PUT", m, _gadget("minimal", size=-1)),
        _case("put-valid-drops-defaults", "PUT", m, _gadget("minimal", size=8)),
        _case(
            "put-unknown-strict",
            "PUT",
            m,
            _gadget("minimal", size=8, bogus=1),
            query={"fieldValidation": "Strict"},
        ),
        _case(
            "put-unknown-warn",
            "PUT",
            m,
            _gadget("minimal", size=9, bogus=1),
            query={"fieldValidation": "Warn"},
        ),
        _case(
            "put-status-spec-ignored",
            "PUT",
            m + "/status",
            {**_gadget("minimal", size=99), "status": {"phase": "Pending"}},
        ),
        _case(
            "put-status-invalid",
            "PUT",
            m + "/status",
            {**_gadget("minimal"), "status": {"replicas": "many"}},
        ),
        _put("put-rv-invalid", m, _gadget("minimal", size=-1)),
        _put("put-rv-valid-defaults-again", m, _gadget("minimal", size=8)),
        _put(
            "put-rv-unknown-warn",
            m,
            _gadget("minimal", size=9, bogus=1),
            query={"fieldValidation": "Warn"},
        ),
        _put(
            "put-rv-status-spec-ignored",
            m + "/status",
            {**_gadget("minimal", size=99), "status": {"phase": "Pending"}},
        ),
        _put(
            "put-rv-status-invalid",
            m + "/status",
            {**_gadget("minimal"), "status": {"replicas": "many"}},
        ),
        _put(
            "put-rv-status-on-main-ignored",
            m,
            {**_gadget("minimal", size=10), "status": {"phase": "Bogus"}},
        ),
        _case("get-minimal-final", "GET", m),
    ]


def _applies() -> list[Case]:
    a = _g("applied")
    q = {"fieldManager": "fid"}
    return [
        _case("apply-create", "PATCH", a, _gadget("applied", tags=["x"]), ctype=APPLY, query=q),
        _case("apply-invalid", "PATCH", a, _gadget("applied", size=1000), ctype=APPLY, query=q),
        _case(
            "apply-unknown-strict",
            "PATCH",
            a,
            _gadget("applied", bogus=1),
            ctype=APPLY,
            query={**q, "fieldValidation": "Strict"},
        ),
        _case(
            "apply-unknown-warn",
            "PATCH",
            a,
            _gadget("applied", bogus=2),
            ctype=APPLY,
            query={**q, "fieldValidation": "Warn"},
        ),
        _case(
            "apply-dup-map-key",
            "PATCH",
            a,
            _gadget("applied", ports=[{"name": "a"}, {"name": "a"}]),
            ctype=APPLY,
            query=q,
        ),
        _case(
            "apply-create-invalid",
            "PATCH",
            _g("applied2"),
            _gadget("applied2", name="X"),
            ctype=APPLY,
            query=q,
        ),
        _case(
            "apply-status",
            "PATCH",
            a + "/status",
            {**_gadget("applied"), "status": {"phase": "Ready"}},
            ctype=APPLY,
            query=q,
        ),
        _case(
            "apply-status-invalid",
            "PATCH",
            a + "/status",
            {**_gadget("applied"), "status": {"phase": "Nope"}},
            ctype=APPLY,
            query=q,
        ),
        _case("get-applied", "GET", a),
        _case("scale-get", "GET", a + "/scale"),
        _case("list-gadgets", "GET", _g()),
    ]


def _widget_cases(widget_version: str) -> list[Case]:
    group = "examples.cloudcoil.dev"
    w = _path("widgets", group, widget_version)

    def widget(name: str, **spec: Any) -> JSON:
        return {
            "apiVersion": f"{group}/{widget_version}",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": spec,
        }

    return [
        _case("widget-create-defaults", "POST", w, widget("w1")),
        _case("widget-create-full", "POST", w, widget("w2", message="hi", replicas=3)),
        _case("widget-replicas-type", "POST", w, widget("w3", replicas="3")),
        _case("widget-message-type", "POST", w, widget("w4", message=5)),
        _case(
            "widget-unknown-strict",
            "POST",
            w,
            widget("w5", colour="red"),
            query={"fieldValidation": "Strict"},
        ),
        _case(
            "widget-unknown-warn",
            "POST",
            w,
            widget("w6", colour="red"),
            query={"fieldValidation": "Warn"},
        ),
        _case(
            "widget-status-write",
            "PATCH",
            w + "/w2/status",
            {"status": {"phase": "Available", "observedGeneration": 1}},
            ctype=MERGE,
        ),
        _case(
            "widget-status-wrong-type",
            "PATCH",
            w + "/w2/status",
            {"status": {"availableReplicas": "x"}},
            ctype=MERGE,
        ),
        _case("widget-merge-spec", "PATCH", w + "/w2", {"spec": {"message": "bye"}}, ctype=MERGE),
        _case("widget-get", "GET", w + "/w2"),
        _case("widget-replicas-rule", "POST", w, widget("w7", replicas=11)),
        _case("widget-replicas-negative", "POST", w, widget("w8", replicas=-1)),
        _case("widget-merge-rule", "PATCH", w + "/w2", {"spec": {"replicas": 12}}, ctype=MERGE),
        _case(
            "widget-apply-create",
            "PATCH",
            w + "/w9",
            widget("w9", replicas=2),
            ctype=APPLY,
            query={"fieldManager": "fid"},
        ),
        _case(
            "widget-apply-rule",
            "PATCH",
            w + "/w9",
            widget("w9", replicas=20),
            ctype=APPLY,
            query={"fieldManager": "fid"},
        ),
        _case("widget-list", "GET", w),
    ]


def _cel_invalid() -> list[tuple[str, JSON]]:
    """One failing CEL rule each (spec.cel unless said), created as its own object."""
    return [
        ("low-above-high", {"cel": {"low": 5, "high": 1}}),
        ("start-message-expression", {"cel": {"start": "abc"}}),
        ("start-contains-x", {"cel": {"start": "sx"}}),
        ("words-upper", {"cel": {"words": ["ok", "No"]}}),
        ("nums-unsorted", {"cel": {"nums": [3, 1]}}),
        ("nums-sum", {"cel": {"nums": [60, 70]}}),
        ("host-regex", {"cel": {"host": "Bad_Host"}}),
        ("when-too-old", {"cel": {"when": "1999-01-01T00:00:00Z"}}),
        ("ttl-too-long", {"cel": {"ttl": "25h"}}),
        ("parts-too-many", {"cel": {"parts": "a-b-c-d"}}),
        ("opt-bad-field-path", {"cel": {"opt": "bad"}}),
        ("low-negative-required-reason", {"cel": {"low": -1}}),
        ("high-duplicate-reason-expression", {"cel": {"high": 5000}}),
        ("dims-keys", {"cel": {"dims": {"d1": 1, "x": 2}}}),
        ("mem-too-big", {"cel": {"mem": "2Gi"}}),
        ("mem-not-quantity", {"cel": {"mem": "lots"}}),
        ("link-not-url", {"cel": {"link": "not a url"}}),
        ("sets-not-subset", {"cel": {"sets": ["a", "z"]}}),
        ("spec-forbidden-name", {"name": "forbidden"}),
        ("spec-secret-forbidden", {"secret": "x"}),
        ("two-rules-fail", {"cel": {"low": 5, "high": 1, "opt": "bad"}}),
        ("schema-error-blocks-rules", {"cel": {"low": "x", "high": 1}}),
        ("nonblocking-schema-error-and-rule", {"size": 0, "cel": {"low": 5, "high": 1}}),
    ]


def _cel_cases() -> list[Case]:
    c = _g("celobj")
    full = {
        "low": 1,
        "high": 2,
        "start": "start",
        "words": ["a", "b"],
        "nums": [1, 2, 3],
        "host": "example.com",
        "when": "2024-01-01T00:00:00Z",
        "ttl": "1h",
        "parts": "a-b",
        "opt": "good",
        "version": 1,
        "dims": {"d1": 1},
        "mem": "512Mi",
        "link": "https://example.com/x",
        "sets": ["a", "c"],
    }
    evil = _gadget("evil")
    out = [
        _create(f"cel-{name}", _gadget(f"c{i}", **spec))
        for i, (name, spec) in enumerate(_cel_invalid())
    ]
    return [
        *out,
        _create("cel-root-metadata-rule", evil),
        _create("cel-valid-create", _gadget("celobj", immutable="fixed", cel=full)),
        _case("cel-immutable-change", "PATCH", c, {"spec": {"immutable": "other"}}, ctype=MERGE),
        _case("cel-version-decrease", "PATCH", c, {"spec": {"cel": {"version": 0}}}, ctype=MERGE),
        _case("cel-version-increase", "PATCH", c, {"spec": {"cel": {"version": 2}}}, ctype=MERGE),
        _case("cel-size-and-rule", "PATCH", c, {"spec": {"size": 0}}, ctype=MERGE),
        _case(
            "cel-json-patch-rule",
            "PATCH",
            c,
            [{"op": "replace", "path": "/spec/cel/low", "value": 9}],
            ctype=JSONP,
        ),
        _put("cel-put-rule", c, _gadget("celobj", immutable="fixed", cel={**full, "nums": [2, 1]})),
        _put("cel-put-immutable", c, _gadget("celobj", immutable="changed", cel=full)),
        _case(
            "cel-apply-rule",
            "PATCH",
            c,
            _gadget("celobj", immutable="fixed", cel={"high": 5000}),
            ctype=APPLY,
            query={"fieldManager": "fid", "force": "true"},
        ),
        _case(
            "cel-status-write-ok",
            "PATCH",
            c + "/status",
            {"status": {"phase": "Ready"}},
            ctype=MERGE,
        ),
        _case("cel-immutable-removed", "PATCH", c, {"spec": {"immutable": None}}, ctype=MERGE),
        _case("cel-get", "GET", c),
    ]


#: (case name, node under the schema root ("" for the root), rule) of rules whose types do not
#: check against the schema: kube-apiserver refuses the CRD.
TYPE_ERRORS = [
    ("int-plus-string", "spec", 'self.size + "x" == ""'),
    ("string-equals-int", "spec", "self.name == 1"),
    ("size-of-object", "spec", "size(self.nested) > 0"),
    ("size-of-self", "spec", "size(self) > 1"),
    ("size-of-spec-at-root", "", "size(self.spec) > 1"),
    ("list-size-vs-string", "spec", "self.tags.size() > self.name"),
    ("map-value-vs-int", "spec", "self.labels.a == 1"),
    ("list-item-field", "spec", 'self.ports[0].port == "x"'),
    ("list-item-object-size", "spec", "self.ports.all(p, size(p) > 0)"),
    ("embedded-metadata-name", "spec", "self.template.metadata.name == 1"),
    ("bool-plus-int", "spec", "self.flag + 1 > 0"),
    ("old-self-typed", "spec", "self.nested.b == oldSelf.nested.a"),
    ("preserve-unknown-undeclared", "spec/extra", '!has(self.x) || self.x.startsWith("ok")'),
]
#: Rules whose estimated cost exceeds kube-apiserver's limits (ports and plain are unbounded).
COST_ERRORS = [
    ("nested-all", "spec", "self.ports.all(a, self.ports.all(b, a.name != b.name || a == b))"),
    ("starts-with-unbounded", "spec", "self.ports.all(p, p.name.startsWith(self.plain))"),
    ("all-exists-on-list", "spec/ports", "self.all(p, self.exists(q, p.name == q.name))"),
]


#: optionalOldSelf on rules that do not use oldSelf (the second does not compile either).
OPTIONAL_ERRORS = [
    ("not-transition", "spec", "self.size > 0", {"optionalOldSelf": True}),
    ("syntax-error", "spec", "self.size +", {"optionalOldSelf": True}),
]


def type_error_cases(prefix: str = "crd-rule-type-", rules: Any = None) -> list[Case]:
    """CRD creations whose one rule does not type-check (all refused: nothing is created)."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    out = []
    for name, where, rule, *extra in TYPE_ERRORS if rules is None else rules:
        crd = gadget_crd()
        crd["metadata"]["name"] = f"badrules.{GROUP}"
        crd["spec"]["names"] = {"plural": "badrules", "singular": "badrule", "kind": "BadRule"}
        node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for part in where.split("/") if where else []:
            node = node["properties"][part]
        node["x-kubernetes-validations"] = [{"rule": rule, **(extra[0] if extra else {})}]
        out.append(_case(f"{prefix}{name}", "POST", crds, crd))
    return out


def _crd_cases() -> list[Case]:
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    gadgets = f"{crds}/gadgets.{GROUP}"
    bad = gadget_crd()
    bad["metadata"]["name"] = f"badrules.{GROUP}"
    bad["spec"]["names"] = {"plural": "badrules", "singular": "badrule", "kind": "BadRule"}
    schema = bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": "self.size +"}]
    undefined = copy.deepcopy(bad)
    schema = undefined["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": "self.nosuch > 0"}]
    undefined_has = copy.deepcopy(undefined)
    schema = undefined_has["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rule = "self.name.size() > 0 &&\n  !has(self.missing)"
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": rule, "message": "m"}]
    defaulted = gadget_crd()
    spec_schema = defaulted["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec_schema["spec"]["properties"]["plain"]["default"] = "added-later"
    bad_default = copy.deepcopy(defaulted)
    spec_schema = bad_default["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec_schema["spec"]["properties"]["count"]["maximum"] = 2  # its default is 3
    tightened = copy.deepcopy(defaulted)
    spec_schema = tightened["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec_schema["spec"]["properties"]["name"]["pattern"] = "^[a-z]{1,2}$"
    spec_schema["spec"]["properties"]["count"]["maximum"] = 4
    m = _g("minimal")
    return [
        _case("crd-rule-syntax-error", "POST", crds, bad),
        _case("crd-rule-undefined-field", "POST", crds, undefined),
        _case("crd-rule-undefined-field-in-has", "POST", crds, undefined_has),
        *type_error_cases(),
        *type_error_cases("crd-rule-cost-", COST_ERRORS),
        *type_error_cases("crd-rule-optional-", OPTIONAL_ERRORS),
        _case("crd-add-default", "PUT", gadgets, defaulted, fresh_rv=gadgets, settle=True),
        _case("get-after-crd-default", "GET", _g("portint")),
        _case("list-after-crd-default", "GET", _g(), query={"limit": "2"}),
        _case("crd-default-violates-schema", "PUT", gadgets, bad_default, fresh_rv=gadgets),
        _case("crd-tighten", "PUT", gadgets, tightened, fresh_rv=gadgets, settle=True),
        _case("ratchet-unchanged-invalid", "PATCH", m, {"spec": {"size": 11}}, ctype=MERGE),
        _case("ratchet-changed-invalid", "PATCH", m, {"spec": {"name": "abcd"}}, ctype=MERGE),
        _case("ratchet-new-invalid-field", "PATCH", m, {"spec": {"count": 5}}, ctype=MERGE),
        _case("ratchet-create-invalid", "POST", _g(), _gadget("ratchetnew")),
        _case("scale-patch", "PATCH", m + "/scale", {"spec": {"replicas": 12}}, ctype=MERGE),
        _case("scale-get-after-patch", "GET", m + "/scale"),
        _case(
            "scale-patch-negative", "PATCH", m + "/scale", {"spec": {"replicas": -1}}, ctype=MERGE
        ),
        _case("get-minimal-after-scale", "GET", m),
    ]


POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def _policy(name: str, resources: JSON, validations: list[JSON], **spec: Any) -> JSON:
    rules = {"apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], **resources}
    constraints = {
        "resourceRules": [rules],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"matchConstraints": constraints, "validations": validations, **spec},
    }


def _binding(policy: str, actions: list[str]) -> JSON:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy},
        "spec": {"policyName": policy, "validationActions": actions},
    }


def policies() -> list[JSON]:
    """The ValidatingAdmissionPolicies of the cases (their bindings have the same names)."""
    cms = {"apiGroups": [""], "resources": ["configmaps"]}
    keys = {"name": "keys", "expression": "has(object.data) ? object.data.size() : 0"}
    exempt = {
        "name": "not-exempt",
        "expression": "!('exempt' in object.metadata.?labels.orValue({}))",
    }
    return [
        _policy(
            "fid39-cm-policy",
            cms,
            [
                {"expression": "variables.keys <= 2", "message": "at most 2 keys"},
                {
                    "expression": "!has(object.data) || !('forbidden' in object.data)",
                    "messageExpression": "'key forbidden in ' + object.metadata.name",
                    "reason": "Forbidden",
                },
            ],
            variables=[keys],
            matchConditions=[exempt],
        ),
        _policy(
            "fid39-warn-policy",
            cms,
            [
                {
                    "expression": "object.metadata.name.startsWith('cm')",
                    "message": "names start with cm",
                }
            ],
        ),
        _policy(
            "fid39-protect-policy",
            {**cms, "operations": ["DELETE"]},
            [
                {
                    "expression": "!('protected' in oldObject.metadata.?labels.orValue({}))",
                    "message": "protected",
                }
            ],
        ),
        _policy(
            "fid39-widget-policy",
            {"apiGroups": ["examples.cloudcoil.dev"], "resources": ["widgets"]},
            [
                {
                    "expression": "object.spec.replicas <= 5",
                    "message": "widgets at most 5 replicas",
                },
                {
                    "expression": "oldObject == null || "
                    "object.spec.message == oldObject.spec.message || "
                    "request.operation == 'UPDATE'"
                },
            ],
        ),
        _policy(
            "fid39-error-policy",
            {**cms, "operations": ["UPDATE"]},
            [{"expression": "object.data.mustexist == 'x'"}],
            failurePolicy="Fail",
            matchConditions=[
                {"name": "marked", "expression": "'check' in object.metadata.?labels.orValue({})"}
            ],
        ),
    ]


def _policy_cases() -> list[Case]:
    cm = f"/api/v1/namespaces/{NS}/configmaps"
    actions = {"fid39-warn-policy": ["Warn"]}

    def configmap(name: str, data: JSON, **labels: str) -> JSON:
        meta: JSON = {"name": name, **({"labels": labels} if labels else {})}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}

    out = [
        _case(f"policy-create-{p['metadata']['name']}", "POST", POLICIES, p, status_only=True)
        for p in policies()
    ]
    out += [
        _case(
            f"binding-create-{p['metadata']['name']}",
            "POST",
            BINDINGS,
            _binding(p["metadata"]["name"], actions.get(p["metadata"]["name"], ["Deny"])),
            status_only=True,
        )
        for p in policies()
    ]
    out[-1]["settle"] = True  # a real server takes a moment to load new policies
    w = _path("widgets", "examples.cloudcoil.dev", "v1alpha1")
    widget = {"apiVersion": "examples.cloudcoil.dev/v1alpha1", "kind": "Widget"}
    return [
        *out,
        _case("vap-cm-allowed", "POST", cm, configmap("cm-ok", {"a": "1", "b": "2"})),
        _case(
            "vap-cm-too-many-keys", "POST", cm, configmap("cm-big", {"a": "1", "b": "2", "c": "3"})
        ),
        _case("vap-cm-forbidden-reason", "POST", cm, configmap("cm-forbidden", {"forbidden": "1"})),
        _case(
            "vap-cm-two-failures",
            "POST",
            cm,
            configmap("cm-two", {"forbidden": "1", "b": "2", "c": "3"}),
        ),
        _case(
            "vap-cm-match-condition-exempt",
            "POST",
            cm,
            configmap("cm-exempt", {"a": "1", "b": "2", "c": "3"}, exempt="yes"),
        ),
        _case("vap-cm-warn-action", "POST", cm, configmap("other", {"a": "1"})),
        _case("vap-cm-update-denied", "PATCH", cm + "/cm-ok", {"data": {"c": "3"}}, ctype=MERGE),
        _case(
            "vap-cm-dry-run-denied",
            "POST",
            cm,
            configmap("cm-dry", {"a": "1", "b": "2", "c": "3"}),
            query={"dryRun": "All"},
        ),
        _case(
            "vap-cm-protected-create", "POST", cm, configmap("cm-protected", {}, protected="yes")
        ),
        _case("vap-cm-protected-delete", "DELETE", cm + "/cm-protected"),
        _case("vap-cm-plain-delete", "DELETE", cm + "/cm-exempt"),
        _case(
            "vap-cm-runtime-error",
            "PATCH",
            cm + "/cm-ok",
            {"metadata": {"labels": {"check": "1"}}},
            ctype=MERGE,
        ),
        _case(
            "vap-widget-denied",
            "POST",
            w,
            {**widget, "metadata": {"name": "vw1"}, "spec": {"replicas": 7}},
        ),
        _case(
            "vap-widget-allowed",
            "POST",
            w,
            {**widget, "metadata": {"name": "vw2"}, "spec": {"replicas": 2}},
        ),
        _case(
            "vap-widget-update-denied", "PATCH", w + "/vw2", {"spec": {"replicas": 6}}, ctype=MERGE
        ),
        _case(
            "vap-widget-status-not-matched",
            "PATCH",
            w + "/vw2/status",
            {"status": {"phase": "x"}},
            ctype=MERGE,
        ),
    ]


def _copied_cases() -> list[Case]:
    """Creates whose bodies kept the resourceVersion of the object they were copied from:
    storage refuses a non-zero one (500), a dry run never reaches storage."""
    cm = f"/api/v1/namespaces/{NS}/configmaps"

    def configmap(name: str, version: str) -> JSON:
        meta = {"name": name, "resourceVersion": version}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}

    copied = _gadget("copied", name="ab")  # valid under the last schema the cases set
    copied["metadata"]["resourceVersion"] = "7"
    return [
        _create("copied-rv-gadget", copied),
        _create("copied-rv-gadget-dry-run", copied, query={"dryRun": "All"}),
        _case("copied-rv-configmap", "POST", cm, configmap("copied-rv", "12")),
        _case("copied-rv-zero-configmap", "POST", cm, configmap("copied-rv-zero", "0")),
        _case("copied-rv-text-configmap", "POST", cm, configmap("copied-rv-text", "abc")),
    ]


def _meta_cases(cm: str) -> list[Case]:
    """ObjectMeta rules (labels, annotations, finalizers, owner references, names) and a
    ConfigMap's keys, on a built-in kind and on a custom resource."""
    managed = [
        {
            "manager": "someone",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2024-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}},
        }
    ]

    def body(name: str, data: JSON | None = None, **meta: Any) -> JSON:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, **meta} if name else meta,
            "data": {"k": "v"} if data is None else data,
        }

    def post(name: str, obj: JSON) -> Case:  # dry runs: a finalizer kept would hold fid39
        return _case(f"meta-{name}", "POST", cm, obj, query={"dryRun": "All"})

    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"}
    gadget = _gadget("meta-gadget", name="ab")
    gadget["metadata"].update(labels={"a": "v" * 64}, finalizers=["plain", "bad finalizer"])
    plain = _gadget("meta-gadget-plain", name="ab")
    plain["metadata"]["finalizers"] = ["plain", "example.com/ok"]
    return [
        post("managed-fields", body("m-mf", managedFields=managed)),
        post("system-fields", body("m-uid", uid="1234", creationTimestamp="2020-01-01T00:00:00Z")),
        post("deletion-fields", body("m-del", deletionTimestamp="2020-01-01T00:00:00Z")),
        post("label-key", body("m-l1", labels={"a/b/c": "x", "Bad_Prefix/x": "y"})),
        post("label-key-long", body("m-l2", labels={"x" * 64: "x"})),
        post("label-key-empty", body("m-l3", labels={"": "x"})),
        post("label-value", body("m-l4", labels={"a": "v" * 64, "b": "bad value!"})),
        post("label-ok", body("m-l5", labels={"example.com/a": "", "b": "A.b-c_d"})),
        post("annotation-key", body("m-a1", annotations={"a b": "x", "Upper/Case": "ok"})),
        post("annotation-size", body("m-a2", annotations={"a": "x" * 262200})),
        post("finalizer-bad", body("m-f1", finalizers=["bad finalizer"])),
        post("finalizer-unqualified", body("m-f2", finalizers=["myfinalizer"])),
        post("finalizer-standard", body("m-f3", finalizers=["orphan", "a.io/x", "a.io/x"])),
        post("owner-empty", body("m-o1", ownerReferences=[{}])),
        post("owner-version", body("m-o2", ownerReferences=[{**owner, "apiVersion": "a/b/c"}])),
        post("owner-no-uid", body("m-o3", ownerReferences=[{**owner, "uid": ""}])),
        post("name-long", body("a" * 254)),
        post("name-dots", body("a" * 64 + ".b")),
        post("generate-name-dash", body("", generateName="ok-")),
        post("data-key", body("m-d1", {"bad key": "v", "..": "w", "..x": "y", "ok": "z"})),
        post("binary-overlap", {**body("m-d2"), "binaryData": {"k": "dg==", "b": "dg=="}}),
        *_secret_cases(cm.replace("configmaps", "secrets")),
        *_deployment_cases(f"/apis/apps/v1/namespaces/{NS}/deployments"),
        _create("meta-gadget", gadget, query={"dryRun": "All"}),
        _create("meta-gadget-finalizer", plain, query={"dryRun": "All"}),
    ]


def _secret_cases(path: str) -> list[Case]:
    """stringData merged into data (and dropped), the default type, keys, a TLS Secret's keys."""

    def secret(name: str, **fields: Any) -> JSON:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, **fields}

    def post(name: str, obj: JSON) -> Case:
        return _case(f"secret-{name}", "POST", path, obj, query={"dryRun": "All"})

    return [
        post("string-data", secret("s1", data={"user": "YWRtaW4="}, stringData={"user": "root"})),
        post("empty-type", secret("s2", type="", stringData={"a": ""})),
        post("keys", secret("s3", data={"bad/key": "YQ==", "..": "YQ=="}, stringData={"a b": "x"})),
        post("tls-missing", secret("s4", type="kubernetes.io/tls", data={})),
        post(
            "tls",
            secret("s5", type="kubernetes.io/tls", stringData={"tls.crt": "x", "tls.key": "y"}),
        ),
        post("too-large", secret("s6", stringData={"a": "x" * 1048577})),
        post("plain-text-data", secret("s7", data={"password": "hunter2"})),
        post("unpadded-data", secret("s8", data={"a": "YQ"})),
        post("number-data", secret("s9", data={"a": 5})),
        post("padded-data", secret("s10", data={"a": "YQ==", "b": "YWRt\naW4="})),
    ]


def _deployment_cases(path: str) -> list[Case]:
    """Replicas, the selector against the template's labels, containers' names and images."""

    def deployment(name: str, selector: Any, labels: Any, **pod: Any) -> JSON:
        spec: JSON = {"replicas": pod.pop("replicas", 1)}
        if selector is not None:
            spec["selector"] = selector
        meta = {} if labels is None else {"labels": labels}
        containers = pod.pop("containers", [{"name": "c", "image": "i"}])
        spec["template"] = {"metadata": meta, "spec": {"containers": containers, **pod}}
        body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}
        return {**body, "spec": spec}

    def post(name: str, obj: JSON) -> Case:
        return _case(f"deployment-{name}", "POST", path, obj, query={"dryRun": "All"})

    app = {"matchLabels": {"app": "a"}}
    bad = [{"name": "Bad_Name"}, {"name": "Bad_Name", "image": "i"}, {"image": "j"}]
    expression = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["b"]}]}
    return [
        post("ok", deployment("d0", app, {"app": "a", "tier": "web"})),
        post("mismatch", deployment("d1", {"matchLabels": {"app": "a", "z": "1"}}, {"app": "b"})),
        post("containers", deployment("d2", app, {"app": "a"}, replicas=-1, containers=bad)),
        post("no-containers", deployment("d3", app, {"app": "a"}, containers=[])),
        post("no-selector", deployment("d4", None, {"app": "a"})),
        post("restart-policy", deployment("d5", app, {"app": "a"}, restartPolicy="Never")),
        post("expression", deployment("d6", expression, {"app": "a"})),
        post("no-labels", deployment("d7", app, None)),
    ]


def cases(widget_version: str = "v1alpha1") -> list[Case]:
    """Every case, in order; each names its request (method, path, body, ctype, query)."""
    out = [
        _create(f"invalid-{name}", _gadget(f"i{i}", **spec))
        for i, (name, spec) in enumerate(_invalid_specs())
    ]
    out += _valid_creates() + _updates() + _applies() + _cel_cases()
    out += _widget_cases(widget_version) + _crd_cases() + _policy_cases() + _copied_cases()
    out += _meta_cases(f"/api/v1/namespaces/{NS}/configmaps")
    for case in out:
        case.setdefault("ctype", "application/json")
        case.setdefault("query", {})
    return out
