"""CEL rules (x-kubernetes-validations) beyond the recorded cases: the Kubernetes library
functions the emulator declares, transition rules, and CRDs refused without the CEL engine."""

from __future__ import annotations

from typing import Any

import pytest

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal import cel_rules
from cloudcoil_sync.testing._internal.cel_library import CelUnavailable
from cloudcoil_sync.testing._internal.cel_rules import compile_rules

from .conftest import Client


def _failures(rule: str, value: Any, old: Any = None, **node: Any) -> list[tuple[str, str, str]]:
    schema = {
        "type": "object",
        "properties": {"v": {**node, "x-kubernetes-validations": [{"rule": rule}]}},
    }
    compiled = compile_rules(schema, "spec.validation.openAPIV3Schema")
    assert compiled.errors == []
    old_obj = None if old is None else {"v": old}
    return compiled.evaluate(schema, {"v": value}, old_obj, "spec")


@pytest.mark.parametrize(
    ("rule", "value"),
    [
        ("quantity(self).isGreaterThan(quantity('500Mi'))", "1Gi"),
        ("quantity(self).compareTo(quantity('1000m')) == 0", "1"),
        ("quantity(self).asInteger() == 1500", "1.5k"),
        ("isQuantity(self) && !isQuantity('1Gx')", "2e3"),
        ("self.isSorted() && self.sum() == 6 && self.max() == 3 && self.min() == 1", [1, 2, 3]),
        ("self.find('[0-9]+') == '42' && self.findAll('[a-z]') == ['a', 'b']", "a42b"),
        ("isIP(self) && !isIP('10.0.0.256') && isCIDR('10.0.0.0/8')", "10.0.0.1"),
        ("isURL(self) && !isURL('not a url')", "https://example.com/x"),
        ("sets.contains(self, ['a']) && sets.intersects(self, ['z', 'b'])", ["a", "b"]),
        ("sets.equivalent(self, ['b', 'a'])", ["a", "b"]),
        ("self.lowerAscii().split('-') == ['a', 'b'] && self.charAt(0) == 'A'", "A-B"),
        ("self.?b.orValue(0) == 0 && self.a == 1", {"a": 1}),
        (
            "ip(self).family() == 4 && ip(self).isGlobalUnicast() && !ip(self).isLoopback()",
            "10.1.2.3",
        ),
        ("ip(self).family() == 6 && ip(self).isLinkLocalUnicast()", "fe80::1"),
        ("ip('::1').isLoopback() && ip('0.0.0.0').isUnspecified()", "x"),
        ("ip('224.0.0.1').isLinkLocalMulticast() && ip(self) == ip('10.0.0.1')", "10.0.0.1"),
        (
            "cidr(self).containsIP('10.1.2.3') && !cidr(self).containsIP(ip('11.0.0.1'))",
            "10.0.0.0/8",
        ),
        ("cidr(self).containsCIDR('10.1.0.0/16') && cidr(self).prefixLength() == 8", "10.0.0.0/8"),
        (
            "cidr(self).masked() == cidr('10.0.0.0/8') && cidr(self).ip() == ip('10.1.2.3')",
            "10.1.2.3/8",
        ),
        (
            "url(self).getScheme() == 'https' && url(self).getHostname() == 'example.com'",
            "https://example.com:8443/a%20b?x=1&x=2",
        ),
        (
            "url(self).getPort() == '8443' && url(self).getHost() == 'example.com:8443'",
            "https://example.com:8443/",
        ),
        (
            "url(self).getEscapedPath() == '/a%20b' && url(self).getQuery()['x'] == ['1', '2']",
            "https://example.com/a%20b?x=1&x=2",
        ),
        ("url(self).getHostname() == '::1' && url(self).getPort() == '80'", "http://[::1]:80/"),
    ],
)
def test_kubernetes_library_functions_hold(rule: str, value: Any) -> None:
    assert _failures(rule, value) == []


@pytest.mark.parametrize(
    ("rule", "value"),
    [
        ("ip(self).family() == 4", "10.0.0.256"),
        ("ip(self).family() == 4", "fe80::1%eth0"),
        ("cidr(self).prefixLength() > 0", "10.0.0.1"),
        ("url(self).getScheme() == 'x'", "not a url"),
    ],
)
def test_a_bad_ip_cidr_or_url_fails_its_rule(rule: str, value: str) -> None:
    causes = _failures(rule, value, type="string")
    assert [c[1] for c in causes] == ["spec.v"]
    assert "parse error during conversion from string" in causes[0][2]
    assert "OUT_OF_RANGE" not in causes[0][2]


def test_a_failing_library_call_is_reported_at_its_field() -> None:
    causes = _failures("quantity(self).isLessThan(quantity('1Gi'))", "2Gi")
    assert causes == [
        (
            "FieldValueInvalid",
            "spec.v",
            "Invalid value: \"string\": failed rule: quantity(self).isLessThan(quantity('1Gi'))",
        )
    ]


def test_transition_rules_run_only_on_updates_with_an_old_value() -> None:
    rule = "self >= oldSelf"
    assert _failures(rule, 1, type="integer") == []  # a create: no oldSelf
    assert _failures(rule, 2, old=1, type="integer") == []
    assert [c[1] for c in _failures(rule, 1, old=2, type="integer")] == ["spec.v"]


def test_an_unknown_function_refuses_the_crd_at_compile_time() -> None:
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.frobnicate()"}]}
    errors = compile_rules(schema, "spec.validation.openAPIV3Schema").errors
    assert [(r, f) for r, f, _ in errors] == [
        ("FieldValueInvalid", "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule")
    ]
    assert "compilation failed: ERROR: <input>:1:" in errors[0][2]


def _crd(rule: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"x": {"type": "string"}, "n": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": rule}],
            }
        },
    }
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "celtests.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "celtests", "kind": "CelTest"},
            "versions": [version],
        },
    }


def test_without_the_cel_engine_a_crd_with_rules_is_refused(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(self_type: str) -> Any:
        raise CelUnavailable("the emulator evaluates x-kubernetes-validations with cel-expr-python")

    monkeypatch.setattr(cel_rules, "environment", unavailable)
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    response = client.post(path, _crd("self.size() > 0"))
    assert response.status_code == 422
    cause = response.json()["details"]["causes"][0]
    assert cause["field"] == "spec.validation.openAPIV3Schema"
    assert "cel-expr-python" in cause["message"]


def test_a_rule_blocks_a_write_through_the_api(client: Client) -> None:
    emulator: Emulator = client.emulator
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert client.post(path, _crd("!has(self.x) || self.x.startsWith('ok')")).status_code == 201
    assert emulator.settle()
    objects = "/apis/example.com/v1/namespaces/default/celtests"
    body = {"apiVersion": "example.com/v1", "kind": "CelTest", "metadata": {"name": "a"}}
    refused = client.post(objects, {**body, "spec": {"x": "no"}})
    assert refused.status_code == 422
    assert refused.json()["details"]["causes"][0]["field"] == "spec"
    assert client.post(objects, {**body, "spec": {}}).status_code == 201


POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def _policy(client: Client, name: str, expression: str, actions: list[str], **spec: Any) -> None:
    rules = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["configmaps"],
        }
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": expression}],
            **spec,
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": actions},
    }
    assert client.post(POLICIES, policy).status_code == 201
    assert client.post(BINDINGS, binding).status_code == 201


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_a_policy_with_params_refuses_rather_than_passing_unchecked(client: Client) -> None:
    kind = {"apiVersion": "v1", "kind": "ConfigMap"}
    _policy(client, "with-params", "true", ["Deny"], paramKind=kind)
    response = client.post("/api/v1/namespaces/default/configmaps", _configmap("a"))
    assert response.status_code == 422
    assert "paramKind/paramRef are not supported by the emulator" in response.json()["message"]


def test_failure_policy_ignore_and_audit_only_let_writes_through(client: Client) -> None:
    _policy(client, "broken", "object.data.missing == 'x'", ["Deny"], failurePolicy="Ignore")
    _policy(client, "audit", "false", ["Audit"])
    response = client.post("/api/v1/namespaces/default/configmaps", _configmap("b"))
    assert response.status_code == 201
    assert "Warning" not in response.headers
    _policy(client, "strict", "object.data.missing == 'x'", ["Deny"])
    refused = client.post("/api/v1/namespaces/default/configmaps", _configmap("c"))
    assert refused.status_code == 422
    assert "resulted in error: no such key: data" in refused.json()["message"]


_TYPED = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer"},
        "ratio": {"type": "number"},
        "name": {"type": "string"},
        "when": {"type": "string", "format": "date-time"},
        "port": {"x-kubernetes-int-or-string": True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "ports": {
            "type": "array",
            "items": {"type": "object", "properties": {"port": {"type": "integer"}}},
        },
        "nested": {"type": "object", "properties": {"b": {"type": "integer"}}},
        "opaque": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def _typed_errors(rule: str) -> list[str]:
    schema = {"type": "object", "properties": {"spec": {**_TYPED}}}
    schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": rule}]
    errors = compile_rules(schema, "spec.validation.openAPIV3Schema").errors
    return [m.split("compilation failed: ", 1)[1] for _, _, m in errors]


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        (
            'self.replicas + "x" == ""',
            "found no matching overload for '_+_' applied to '(int, string)'",
        ),
        ("self.name == 1", "found no matching overload for '_==_' applied to '(string, int)'"),
        ("size(self.nested) > 0", "found no matching overload for 'size' applied to '(selfType"),
        ("size(self) > 0", "found no matching overload for 'size' applied to '(selfType"),
        ("self.labels.a == 1", "found no matching overload for '_==_' applied to '(string, int)'"),
        ('self.ports[0].port == "x"', "applied to '(int, string)'"),
        ("self.ports.all(p, size(p) > 0)", ".ports.@idx)'"),
        ("self.nested.b == oldSelf.name", "applied to '(int, string)'"),
        ("self.opaque.x == 1", "undefined field 'x'"),
    ],
)
def test_a_type_error_refuses_the_crd_as_kube_apiserver(rule: str, error: str) -> None:
    errors = _typed_errors(rule)
    assert len(errors) == 1 and errors[0].startswith("ERROR: <input>:1:")
    assert error in errors[0]


@pytest.mark.parametrize(
    "rule",
    [
        "self.ratio > 1 && self.replicas < 2.5",  # cel-go compares numbers across types
        "self.port == 1 || self.port == 'a'",  # int-or-string is dyn
        "self.when > timestamp('2000-01-01T00:00:00Z')",
        "self.?nested.b.orValue(1) == 1 && self.labels.all(k, self.labels[k] != '')",
        "self.ports.all(p, p.port > 0) && self.nested == oldSelf.nested",
    ],
)
def test_a_well_typed_rule_compiles(rule: str) -> None:
    assert _typed_errors(rule) == []


def _optional(rule: str, value: Any, old: Any = None) -> list[tuple[str, str, str]]:
    node: dict[str, Any] = {"type": "integer"}
    node["x-kubernetes-validations"] = [{"rule": rule, "optionalOldSelf": True}]
    schema = {"type": "object", "properties": {"v": node}}
    compiled = compile_rules(schema, "spec.validation.openAPIV3Schema")
    assert compiled.errors == []
    return compiled.evaluate(schema, {"v": value}, None if old is None else {"v": old}, "spec")


def test_an_optional_old_self_rule_also_runs_on_create() -> None:
    rule = "!oldSelf.hasValue() || self >= oldSelf.value()"
    assert _optional(rule, 1) == []
    assert _optional(rule, 2, old=1) == []
    assert [c[1] for c in _optional(rule, 1, old=2)] == ["spec.v"]
    assert [c[1] for c in _optional("oldSelf.hasValue()", 1)] == ["spec.v"]  # ran on create
    assert _optional("oldSelf.orValue(0) <= self", 3, old=3) == []


def test_optional_old_self_without_old_self_refuses_the_crd() -> None:
    rule = {"rule": "self.v > 0", "optionalOldSelf": True}
    schema: dict[str, Any] = {"type": "object", "properties": {"v": {"type": "integer"}}}
    schema["x-kubernetes-validations"] = [rule]
    errors = compile_rules(schema, "spec.validation.openAPIV3Schema").errors
    assert errors == [
        (
            "FieldValueInvalid",
            "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].optionalOldSelf",
            "Invalid value: true: may not be set if oldSelf is not used in rule",
        )
    ]
