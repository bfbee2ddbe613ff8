"""kube-apiserver's ObjectMeta rules (apimachinery's ValidateObjectMeta and core's finalizer
rule): names, labels, annotations, owner references and finalizers, with its messages.

Every kind's create and update goes through them (built-in and custom resources), so an
operator that writes a 64-character label value or an unqualified finalizer is refused here as
in a cluster. Go reports a map's entries in random order; these follow the object's order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "LABEL",
    "SUBDOMAIN",
    "Cause",
    "config_key_messages",
    "finalizer_warnings",
    "invalid_value",
    "label_messages",
    "meta_causes",
    "subdomain",
]

JSON = dict[str, Any]
Cause = tuple[str, str, str]  # (reason, field, message)

_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_CONFIG_KEY_RE = re.compile(r"[-._a-zA-Z0-9]+")

SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_QUALIFIED = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_CONFIG_KEY = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)
_ANNOTATIONS_LIMIT = 262144
_STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain's messages (none: valid)."""
    out = [_too_long(253)] if len(value) > 253 else []
    return out + ([] if _SUBDOMAIN_RE.fullmatch(value) else [SUBDOMAIN])


def label_messages(value: str) -> list[str]:
    """IsDNS1123Label's messages (none: valid)."""
    out = [_too_long(63)] if len(value) > 63 else []
    return out + ([] if _LABEL_RE.fullmatch(value) else [LABEL])


def _qualified(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name of ≤ 63."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_QUALIFIED} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    out: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        out += (
            ["prefix part must be non-empty"]
            if not prefix
            else [f"prefix part {m}" for m in subdomain(prefix)]
        )
    name = parts[-1]
    if not name:
        out.append("name part must be non-empty")
    elif len(name) > 63:
        out.append(f"name part {_too_long(63)}")
    if not _QUALIFIED_RE.fullmatch(name):
        out.append(f"name part {_QUALIFIED}")
    return out


def invalid_value(field: str, value: Any, message: str) -> Cause:
    """A FieldValueInvalid cause, worded as field.Invalid words it."""
    return ("FieldValueInvalid", field, f"Invalid value: {json.dumps(value)}: {message}")


def _name_causes(meta: JSON, rule: Callable[[str], list[str]]) -> list[Cause]:
    causes: list[Cause] = []
    prefix = meta.get("generateName")
    if isinstance(prefix, str) and prefix:
        masked = prefix[:-1] + "a" if prefix.endswith("-") else prefix
        causes += [invalid_value("metadata.generateName", prefix, m) for m in rule(masked)]
    name = meta.get("name") or ""
    if not name:
        message = "Required value: name or generateName is required"
        return [*causes, ("FieldValueRequired", "metadata.name", message)]
    return causes + [invalid_value("metadata.name", name, m) for m in rule(str(name))]


def _label_causes(labels: Any) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in (labels if isinstance(labels, dict) else {}).items():
        causes += [invalid_value("metadata.labels", key, m) for m in _qualified(key)]
        text = value if isinstance(value, str) else ""
        too_long = [_too_long(63)] if len(text) > 63 else []
        bad = too_long + ([] if _VALUE_RE.fullmatch(text) else [_VALUE])
        causes += [invalid_value("metadata.labels", value, m) for m in bad]
    return causes


def _annotation_causes(annotations: Any) -> list[Cause]:
    causes: list[Cause] = []
    size = 0
    for key, value in (annotations if isinstance(annotations, dict) else {}).items():
        causes += [invalid_value("metadata.annotations", key, m) for m in _qualified(key.lower())]
        size += len(key.encode()) + len(str(value or "").encode())
    if size > _ANNOTATIONS_LIMIT:
        message = f"Too long: may not be more than {_ANNOTATIONS_LIMIT} bytes"
        causes.append(("FieldValueTooLong", "metadata.annotations", message))
    return causes


def _owner_causes(owners: Any) -> list[Cause]:
    causes: list[Cause] = []
    controllers: list[JSON] = []
    path = "metadata.ownerReferences"
    for owner in owners if isinstance(owners, list) else []:
        owner = owner if isinstance(owner, dict) else {}
        version = str(owner.get("apiVersion") or "")
        parts = version.split("/")
        if len(parts) > 2 or not parts[-1]:
            causes.append(invalid_value(f"{path}.apiVersion", version, "version must not be empty"))
        for key, what in (("kind", "kind"), ("name", "name"), ("uid", "uid")):
            if not owner.get(key):
                value = str(owner.get(key) or "")
                causes.append(invalid_value(f"{path}.{key}", value, f"{what} must not be empty"))
        if owner.get("controller") is True:
            controllers.append(owner)
    if len(controllers) > 1:
        named = " and ".join(f"{o.get('kind', '')}/{o.get('name', '')}" for o in controllers)
        message = (
            f"Invalid value: {_go_owners(owners)}: Only one reference can have Controller set "
            f'to true. Found "true" in references for {named}'
        )
        causes.append(("FieldValueInvalid", path, message))
    return causes


def _go_owners(owners: list[JSON]) -> str:
    """Go's %#v of the references (its pointer addresses are arbitrary there too)."""

    def flag(value: Any) -> str:
        return "(*bool)(nil)" if value is None else "(*bool)(0xc000000000)"

    items = ", ".join(
        f"v1.OwnerReference{{APIVersion:{json.dumps(o.get('apiVersion', ''))}, "
        f"Kind:{json.dumps(o.get('kind', ''))}, Name:{json.dumps(o.get('name', ''))}, "
        f"UID:{json.dumps(o.get('uid', ''))}, Controller:{flag(o.get('controller'))}, "
        f"BlockOwnerDeletion:{flag(o.get('blockOwnerDeletion'))}}}"
        for o in owners
    )
    return f"[]v1.OwnerReference{{{items}}}"


def _finalizer_causes(finalizers: Any, *, qualified_only: bool) -> list[Cause]:
    causes: list[Cause] = []
    for index, finalizer in enumerate(finalizers if isinstance(finalizers, list) else []):
        text = str(finalizer)
        causes += [invalid_value("metadata.finalizers", text, m) for m in _qualified(text)]
        if not qualified_only and "/" not in text and text not in _STANDARD_FINALIZERS:
            message = "name is neither a standard finalizer name nor is it fully qualified"
            causes.append(invalid_value(f"metadata.finalizers[{index}]", text, message))
    return causes


def meta_causes(meta: JSON, *, names: str = "subdomain", builtin: bool = True) -> list[Cause]:
    """What ValidateObjectMeta refuses in ``meta``; ``names``: "subdomain", "label" (as
    Namespaces) or "path" (RBAC: checked by the caller); ``builtin`` adds core's rule that a
    finalizer is standard or has a '/' (custom resources and CRDs go without it)."""
    causes: list[Cause] = []
    if names != "path":
        causes += _name_causes(meta, label_messages if names == "label" else subdomain)
    causes += _label_causes(meta.get("labels"))
    causes += _annotation_causes(meta.get("annotations"))
    causes += _owner_causes(meta.get("ownerReferences"))
    return causes + _finalizer_causes(meta.get("finalizers"), qualified_only=not builtin)


def finalizer_warnings(meta: JSON, old: JSON | None) -> list[str]:
    """A custom resource's new finalizers that are neither standard nor domain-qualified:
    kube-apiserver accepts them with a warning."""
    before = set((old or {}).get("finalizers") or [])
    return [
        f"metadata.finalizers: {json.dumps(str(name))}: prefer a domain-qualified finalizer "
        "name to avoid accidental conflicts with other finalizer writers"
        for name in meta.get("finalizers") or []
        if "/" not in str(name) and name not in _STANDARD_FINALIZERS and name not in before
    ]


def config_key_messages(key: str) -> list[str]:
    """IsConfigMapKey: ConfigMap and Secret data keys."""
    out = [_too_long(253)] if len(key) > 253 else []
    out += [] if _CONFIG_KEY_RE.fullmatch(key) else [_CONFIG_KEY]
    if key in (".", ".."):
        out.append(f"must not be '{key}'")
    elif key.startswith(".."):
        out.append("must not start with '..'")
    return out
