"""kube-apiserver's Deployment rules that operators building Deployments trip over: replicas,
a selector that matches the template's labels, and each container's name and image.

Messages are kube-apiserver 1.32's (recorded in tests/recordings/fidelity). Not covered: the
rest of the pod spec (volumes, probes, resources, ports...), strategy fields and the
other workload kinds.
"""

from __future__ import annotations

import json
from typing import Any

from cloudcoil_sync.testing._internal.admission_match import selector_matches
from cloudcoil_sync.testing._internal.object_meta import Cause, invalid_value, label_messages

__all__ = ["deployment_causes"]

JSON = dict[str, Any]


def deployment_causes(obj: JSON) -> list[Cause]:
    spec = _object(obj.get("spec"))
    causes: list[Cause] = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        message = f"Invalid value: {replicas}: must be greater than or equal to 0"
        causes.append(("FieldValueInvalid", "spec.replicas", message))
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        causes.append(("FieldValueRequired", "spec.selector", "Required value"))
    template = _object(spec.get("template"))
    labels = _object(template.get("metadata")).get("labels")
    if not _matches(selector, labels or {}):
        message = f"Invalid value: {_go_map(labels)}: `selector` does not match template `labels`"
        causes.append(("FieldValueInvalid", "spec.template.metadata.labels", message))
    pod = _object(template.get("spec"))
    causes += _container_causes(pod.get("containers"), "spec.template.spec.containers")
    policy = pod.get("restartPolicy")
    if policy is not None and policy != "Always":
        message = f'Unsupported value: {json.dumps(policy)}: supported values: "Always"'
        causes.append(("FieldValueNotSupported", "spec.template.spec.restartPolicy", message))
    return causes


def _container_causes(containers: Any, path: str) -> list[Cause]:
    if not containers:
        return [("FieldValueRequired", path, "Required value")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, container in enumerate(containers):
        container = container if isinstance(container, dict) else {}
        at = f"{path}[{index}]"
        name = str(container.get("name") or "")
        if not name:
            causes.append(("FieldValueRequired", f"{at}.name", "Required value"))
        else:
            causes += [invalid_value(f"{at}.name", name, m) for m in label_messages(name)]
            if name in seen:
                message = f"Duplicate value: {json.dumps(name)}"
                causes.append(("FieldValueDuplicate", f"{at}.name", message))
            seen.add(name)
        if not container.get("image"):
            causes.append(("FieldValueRequired", f"{at}.image", "Required value"))
    return causes


def _matches(selector: Any, labels: dict[str, str]) -> bool:
    """A LabelSelector against labels; no selector matches nothing, as in Go."""
    return isinstance(selector, dict) and selector_matches(selector, labels)


def _go_map(labels: Any) -> str:
    """Go's %#v of a map[string]string (keys sorted, as fmt prints maps)."""
    if labels is None:
        return "map[string]string(nil)"
    pairs = ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(labels.items()))
    return f"map[string]string{{{pairs}}}"


def _object(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}
