"""``CRD``: one served/storage version of a CustomResourceDefinition built from a model."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

import yaml
from cloudcoil.resources import Resource
from pydantic.errors import PydanticInvalidForJsonSchema

from cloudcoil_sync._internal.names import is_dns1035_label, is_dns_label, is_dns_subdomain
from cloudcoil_sync.crd._internal.decorator import Scope, resource_options
from cloudcoil_sync.crd._internal.markers import COLUMN_KEY, PrinterColumn, SchemaError
from cloudcoil_sync.crd._internal.schema import check_models, structural_schema
from cloudcoil_sync.crd._internal.versions import Version, Versions

__all__ = ["CRD"]

_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_AGE = PrinterColumn(name="Age", json_path=".metadata.creationTimestamp", type="date")


class CRD:
    """A CRD derived from a Resource model, or from a `Versions` of several models.

    With `Versions`, every version is listed with its own schema and columns, names and
    scope come from the storage version, and ``spec.conversion`` asks for the webhook.

    Group, version and kind come from ``resource.gvk()``; every other setting falls back
    to the model's ``@custom_resource`` declaration. The status subresource is enabled
    when the model has a status field (which must then be an optional object).
    ``columns=[]`` disables the default ``Age`` column. Nothing is sent to a cluster.
    """

    def __init__(
        self,
        resource: type[Resource] | Versions,
        *,
        plural: str | None = None,
        scope: Scope | None = None,
        singular: str | None = None,
        short_names: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        status: bool | None = None,
        columns: Sequence[PrinterColumn] | None = None,
    ) -> None:
        self.versions = resource if isinstance(resource, Versions) else None
        resource = resource.storage.model if isinstance(resource, Versions) else resource
        if not isinstance(resource, type) or not issubclass(resource, Resource):
            raise TypeError(f"resource must be a Resource subclass, got {resource!r}")
        declared = resource_options(resource)
        if declared is not None:
            plural = declared.plural if plural is None else plural
            scope = declared.scope if scope is None else scope
            singular = declared.singular if singular is None else singular
            short_names = declared.short_names if short_names is None else short_names
            categories = declared.categories if categories is None else categories
            status = declared.status if status is None else status
            columns = declared.columns if columns is None else columns
        if plural is None:
            raise ValueError("Pass plural=... or declare @custom_resource(plural=...) on the model")
        group, version, kind = _identity(resource)
        singular = kind.lower() if singular is None else singular
        scope = "Namespaced" if scope is None else scope
        _check_names(group, plural, singular, scope, short_names, categories)
        version_spec = _version(resource, version, status, columns)
        names: dict[str, Any] = {"plural": plural, "singular": singular}
        names.update(kind=kind, listKind=f"{kind}List")
        if short_names:
            names["shortNames"] = list(short_names)
        if categories:
            names["categories"] = list(categories)
        self.resource = resource
        self.plural = plural
        self.scope: Scope = scope
        self.group = group
        self.version = version
        self.kind = kind
        self.name = f"{plural}.{group}"
        self._manifest: dict[str, Any] = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": self.name},
            "spec": {
                "group": group,
                "scope": self.scope,
                "names": names,
                "versions": [version_spec],
            },
        }
        if self.versions is not None and self.versions.multiple:
            _add_versions(self._manifest["spec"], self.versions)

    @property
    def status(self) -> bool:
        """Whether the status subresource is enabled (of the storage version)."""
        versions = self._manifest["spec"]["versions"]
        stored = next(v for v in versions if v.get("storage"))
        return "subresources" in stored

    def manifest(self) -> dict[str, Any]:
        """An independent copy of the manifest, for YAML export or API submission."""
        return copy.deepcopy(self._manifest)

    def to_yaml(self) -> str:
        """The CRD as one YAML document (no Python-specific tags)."""
        return yaml.safe_dump(self._manifest, sort_keys=False)

    def __repr__(self) -> str:
        return f"CRD({self.resource.__name__}, name={self.name!r})"


def _add_versions(spec: dict[str, Any], versions: Versions) -> None:
    spec["versions"] = [_version_entry(entry) for entry in versions.versions]
    # The webhook's clientConfig is the Application's (service and CA bundle).
    spec["conversion"] = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}


def _version_entry(entry: Version) -> dict[str, Any]:
    """One version of a multi-version CRD, from its model's own declaration."""
    declared = resource_options(entry.model)
    status = declared.status if declared is not None else None
    columns = declared.columns if declared is not None else None
    _identity(entry.model)
    spec = _version(entry.model, entry.name, status, columns)
    spec["served"], spec["storage"] = entry.served, entry.storage
    if entry.deprecated:
        spec["deprecated"] = True
        if entry.deprecation_warning is not None:
            spec["deprecationWarning"] = entry.deprecation_warning
    return spec


def _identity(resource: type[Resource]) -> tuple[str, str, str]:
    try:
        gvk = resource.gvk()
    except ValueError:
        raise ValueError(
            f"{resource.__name__} needs string api_version and kind defaults; "
            "use @custom_resource(api_version=...)"
        ) from None
    api_version, kind = gvk.api_version, gvk.kind
    if not isinstance(api_version, str) or api_version.count("/") != 1:
        raise ValueError(
            f"api_version must have exactly one group/version separator, got {api_version!r}"
        )
    group, _, version = api_version.partition("/")
    if not is_dns_subdomain(group):
        raise ValueError(
            f"CRDs require an api_version with a valid DNS group and version, got {api_version!r}"
        )
    if not is_dns1035_label(version):
        raise ValueError(f"CRD version must be a DNS label starting with a letter, got {version!r}")
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ValueError(
            f"CRD kind must be an alphanumeric identifier starting with a letter, got {kind!r}"
        )
    return group, version, kind


def _check_names(
    group: str,
    plural: str,
    singular: str,
    scope: str,
    short_names: Sequence[str] | None,
    categories: Sequence[str] | None,
) -> None:
    for label, value in (("plural", plural), ("singular", singular)):
        if not is_dns1035_label(value):
            raise ValueError(f"{label} must be a DNS label starting with a letter")
    if len(f"{plural}.{group}") > 253:
        raise ValueError("CRD metadata.name exceeds 253 characters")
    if scope not in ("Namespaced", "Cluster"):
        raise ValueError("scope must be Namespaced or Cluster")
    for label, values in (("short_names", short_names), ("categories", categories)):
        if isinstance(values, str) or not all(map(is_dns_label, values or ())):
            raise ValueError(f"{label} must contain DNS label names")


def _version(
    resource: type[Resource],
    version: str,
    status: bool | None,
    columns: Sequence[PrinterColumn] | None,
) -> dict[str, Any]:
    schema = _root_schema(resource)
    annotated = _annotated_columns(schema, "", enabled=columns is None)
    properties = schema.get("properties", {})
    enabled = "status" in properties if status is None else status
    if enabled:
        if "status" not in properties:
            raise SchemaError("status=True requires a status field on the resource model")
        if "status" in schema.get("required", []):
            raise SchemaError(
                "status must be optional (for example Status | None = None) "
                "because the status subresource strips it on create"
            )
        if properties["status"].get("type") != "object":
            raise SchemaError("status must be an object or optional object")
    spec: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
    }
    if enabled:
        spec["subresources"] = {"status": {}}
    chosen = [*annotated, _AGE] if columns is None else list(columns)
    if chosen:
        spec["additionalPrinterColumns"] = [column.manifest() for column in chosen]
    return spec


def _root_schema(resource: type[Resource]) -> dict[str, Any]:
    check_models(resource)
    api_field = resource.model_fields["api_version"]
    if (api_field.serialization_alias or api_field.alias) != "apiVersion":
        raise SchemaError("api_version must declare Field(default=..., alias='apiVersion')")
    try:
        raw = resource.model_json_schema(by_alias=True, mode="validation")
    except PydanticInvalidForJsonSchema as error:
        raise SchemaError(f"{resource.__name__}: {error.message}") from error
    properties = raw.get("properties", {})
    if "kind" not in properties or "metadata" not in properties:
        raise SchemaError("kind and metadata must retain their Kubernetes field names")
    # The API server owns these: type strings and ObjectMeta, whatever the model says.
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = {"type": "object"}
    return structural_schema(raw, resource.__name__)


def _annotated_columns(schema: dict[str, Any], path: str, *, enabled: bool) -> list[PrinterColumn]:
    """Collect (and strip) Annotated PrinterColumn markers, inferring path and type."""
    found: list[PrinterColumn] = []
    marker = schema.pop(COLUMN_KEY, None)
    if marker is not None and enabled:
        found.append(_infer_column(dict(marker), schema, path))
    for name, child in schema.get("properties", {}).items():
        # kubectl's JSONPath needs punctuation in property names backslash-escaped.
        escaped = re.sub(r"([^a-zA-Z0-9_-])", r"\\\1", name)
        found.extend(_annotated_columns(child, f"{path}.{escaped}", enabled=enabled))
    if isinstance(schema.get("items"), dict):
        found.extend(_annotated_columns(schema["items"], f"{path}[]", enabled=enabled))
    if isinstance(schema.get("additionalProperties"), dict):
        found.extend(
            _annotated_columns(schema["additionalProperties"], f"{path}.*", enabled=enabled)
        )
    return found


def _infer_column(marker: dict[str, Any], schema: dict[str, Any], path: str) -> PrinterColumn:
    if not marker.get("json_path"):
        if not path or "[]" in path or "*" in path:
            raise SchemaError("PrinterColumn inside a list/map needs an explicit json_path")
        marker["json_path"] = path
    if not marker.get("type"):
        kind = schema.get("type")
        if kind not in ("string", "integer", "number", "boolean"):
            raise SchemaError(f"{path}: PrinterColumn needs a scalar field or explicit type")
        marker["type"] = "date" if schema.get("format") == "date-time" else kind
    return PrinterColumn(**marker)
