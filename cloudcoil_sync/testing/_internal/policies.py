"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) evaluated by the emulator's CEL
engine (``cel_library.py``), as kube-apiserver 1.32's admission plugin does.

For a write over HTTP (create, update, delete), every ValidatingAdmissionPolicyBinding (by
name) whose policy's ``matchConstraints`` (resource rules and exclusions, namespace and
object selectors) and own ``matchResources`` match it is evaluated: ``matchConditions`` (all
true, else skipped), ``variables`` (in order), then the ``validations``; the first failing one
decides, with its ``message``, ``messageExpression`` or ``failed expression: <expr>``.
``validationActions``: ``Deny`` refuses with kube-apiserver's Status (422 Invalid, or 403 for
``reason: Forbidden``), ``Warn`` adds a ``Warning`` header, ``Audit`` is recorded nowhere.
An expression that fails to compile or evaluate is a failure under ``failurePolicy: Fail``
(the default) and ignored under ``Ignore``. Not supported: ``paramKind``/``paramRef`` (such a
policy refuses what it matches, saying so, rather than passing it unchecked), ``auditAnnotations``,
the ``authorizer`` variable; no cost budget; expressions are not type-checked against schemas.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.admission_match import (
    Attempt,
    labels_of,
    namespace_matches,
    rule_matches,
    selector_matches,
)
from cloudcoil_sync.testing._internal.cel_library import CelUnavailable, environment, error_text
from cloudcoil_sync.testing._internal.store import Store

__all__ = ["PolicyEvaluator"]

JSON = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
POLICIES = (GROUP, "validatingadmissionpolicies")
BINDINGS = (GROUP, "validatingadmissionpolicybindings")
_CODES = {"Invalid": 422, "Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}
_lock = threading.Lock()


class _Failed(Exception):
    """An expression that could not be compiled or evaluated."""


@dataclass
class _Outcome:
    message: str
    reason: str


class PolicyEvaluator:
    """Evaluates the stored policies and bindings for one write (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._programs: dict[str, Any] = {}

    def validate(self, attempt: Attempt) -> None:
        if attempt.req.user is None:  # the emulator's own writes, as for webhooks
            return
        bindings, _ = self.store.scan(BINDINGS, "")
        for entry in bindings:
            binding = entry.obj
            spec = binding.get("spec") or {}
            policy = self.store.get(POLICIES, "", str(spec.get("policyName", "")))
            if policy is None or not self._matches(policy, spec, attempt):
                continue
            outcome = self._evaluate(policy, attempt)
            if outcome is not None:
                self._act(policy, binding, outcome, attempt)

    # -- matching ----------------------------------------------------------------------------
    def _matches(self, policy: JSON, binding_spec: JSON, attempt: Attempt) -> bool:
        constraints = (policy.get("spec") or {}).get("matchConstraints") or {}
        if not self._resources_match(constraints, attempt, required=True):
            return False
        own = binding_spec.get("matchResources")
        return not own or self._resources_match(own, attempt, required=False)

    def _resources_match(self, match: JSON, attempt: Attempt, required: bool) -> bool:
        rules = match.get("resourceRules")
        if (rules or required) and not any(rule_matches(r, attempt) for r in rules or []):
            return False
        if any(rule_matches(r, attempt) for r in match.get("excludeResourceRules") or []):
            return False
        if not namespace_matches(self.store, match.get("namespaceSelector"), attempt):
            return False
        selector = match.get("objectSelector")
        return not selector or any(
            obj is not None and selector_matches(selector, labels_of(obj))
            for obj in (attempt.obj, attempt.old)
        )

    # -- evaluation --------------------------------------------------------------------------
    def _evaluate(self, policy: JSON, attempt: Attempt) -> _Outcome | None:
        """The failing validation's outcome, or None when the request passes this policy."""
        spec = policy.get("spec") or {}
        ignore = spec.get("failurePolicy") == "Ignore"
        try:
            if spec.get("paramKind"):
                raise _Failed("paramKind/paramRef are not supported by the emulator")
            data = _activation(attempt)
            if attempt.req.namespace:
                key = ("", "namespaces")
                data["namespaceObject"] = self.store.get(key, "", attempt.req.namespace)
            for condition in spec.get("matchConditions") or []:
                if self._run(condition["expression"], data) is not True:
                    return None
            variables: JSON = {}
            data["variables"] = variables
            for variable in spec.get("variables") or []:
                variables[variable["name"]] = self._run(variable["expression"], data)
            for validation in spec.get("validations") or []:
                outcome = self._check(validation, data)
                if outcome is not None:
                    return outcome
        except _Failed as failed:
            return None if ignore else _Outcome(str(failed), "Invalid")
        return None

    def _check(self, validation: JSON, data: JSON) -> _Outcome | None:
        expression = str(validation.get("expression", ""))
        if self._run(expression, data) is True:
            return None
        message = validation.get("message") or f"failed expression: {expression}"
        if validation.get("messageExpression"):
            try:
                text = self._run(validation["messageExpression"], data)
            except _Failed:
                text = None
            if isinstance(text, str) and text.strip():
                message = text
        return _Outcome(message, str(validation.get("reason") or "Invalid"))

    def _run(self, expression: str, data: JSON) -> Any:
        program = self._program(expression)
        with _lock:
            result = program.eval(data=data)
            value = result.plain_value()
            failed = result.type().name() == "ERROR"
        if failed:
            raise _Failed(f"expression '{expression}' resulted in error: {error_text(str(value))}")
        return value

    def _program(self, expression: str) -> Any:
        if expression not in self._programs:
            try:
                env = environment("policy")
                with _lock:
                    self._programs[expression] = env.compile(expression)
            except (RuntimeError, CelUnavailable) as exc:
                text = error_text(str(exc)).removesuffix(" [INVALID_ARGUMENT]")
                raise _Failed(f"compilation failed for expression '{expression}': {text}") from None
        return self._programs[expression]

    # -- actions -----------------------------------------------------------------------------
    def _act(self, policy: JSON, binding: JSON, outcome: _Outcome, attempt: Attempt) -> None:
        names = f"'{policy['metadata']['name']}' with binding '{binding['metadata']['name']}'"
        actions = (binding.get("spec") or {}).get("validationActions") or []
        if "Warn" in actions:
            text = f"Validation failed for ValidatingAdmissionPolicy {names}: {outcome.message}"
            attempt.req.warn(text)
        if "Deny" not in actions:
            return
        req = attempt.req
        meta = (attempt.obj or attempt.old or {}).get("metadata") or {}
        name = req.name or meta.get("name", "")
        denial = f"ValidatingAdmissionPolicy {names} denied request: {outcome.message}"
        subject = f"{req.rt.plural}.{req.rt.group}" if req.rt.group else req.rt.plural
        details: JSON = {"name": name, "kind": req.rt.plural, "causes": [{"message": denial}]}
        if req.rt.group:
            details["group"] = req.rt.group
        code = _CODES.get(outcome.reason, 422)
        message = f'{subject} "{name}" is forbidden: {denial}'
        raise st.ApiError(code, outcome.reason, message, details)


def _activation(attempt: Attempt) -> JSON:
    req = attempt.req
    user = req.user
    request = {
        "operation": attempt.operation,
        "name": req.name,
        "namespace": req.namespace,
        "subResource": req.subresource,
        "kind": {"group": req.rt.group, "version": req.rt.version, "kind": req.rt.kind},
        "resource": {"group": req.rt.group, "version": req.rt.version, "resource": req.rt.plural},
        "userInfo": {
            "username": user.name if user else "",
            "groups": list(user.groups) if user else [],
        },
        "dryRun": attempt.dry_run,
    }
    return {
        "object": attempt.obj,
        "oldObject": attempt.old,
        "request": request,
        "params": None,
        "namespaceObject": None,
    }
