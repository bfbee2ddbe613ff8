"""``@custom_resource``: keep CRD metadata with a Resource model."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from cloudcoil.resources import Resource

from cloudcoil_sync.crd._internal.markers import PrinterColumn

__all__ = ["CustomResourceOptions", "Scope", "custom_resource", "resource_options"]

Scope = Literal["Namespaced", "Cluster"]
ATTRIBUTE = "__cloudcoil_crd__"
R = TypeVar("R", bound=type[Resource])


@dataclass(frozen=True)
class CustomResourceOptions:
    """What ``@custom_resource`` declared; stored as ``Model.__cloudcoil_crd__``.

    ``plural``, ``scope`` and ``status`` feed the client's offline REST mapping;
    ``status`` is resolved when declared as None (True when the model has a ``status``
    field). ``group``/``version``/``kind`` are read from the model's field defaults.
    """

    plural: str
    scope: Scope
    singular: str | None
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    status: bool | None
    columns: tuple[PrinterColumn, ...] | None
    resource: type[Resource] = field(repr=False, compare=False)

    @property
    def group(self) -> str | None:
        api_version = _default(self.resource, "api_version")
        return api_version.rpartition("/")[0] if api_version is not None else None

    @property
    def version(self) -> str | None:
        api_version = _default(self.resource, "api_version")
        return api_version.rpartition("/")[2] if api_version is not None else None

    @property
    def kind(self) -> str | None:
        return _default(self.resource, "kind")


def _default(resource: type[Resource], name: str) -> str | None:
    info = resource.model_fields.get(name)
    value = info.default if info is not None else None
    return value if isinstance(value, str) else None


def resource_options(resource: type[Resource]) -> CustomResourceOptions | None:
    """The class's own declaration; subclasses are new kinds and must declare their own."""
    options = resource.__dict__.get(ATTRIBUTE)
    return options if isinstance(options, CustomResourceOptions) else None


def custom_resource(
    *,
    plural: str,
    api_version: str | None = None,
    kind: str | None = None,
    scope: Scope = "Namespaced",
    singular: str | None = None,
    short_names: Sequence[str] = (),
    categories: Sequence[str] = (),
    status: bool | None = None,
    columns: Sequence[PrinterColumn] | None = None,
) -> Callable[[R], R]:
    """Declare a Resource subclass as a custom resource; generate it with ``CRD(Model)``.

    Returns the same class; performs no cluster I/O and registers nothing. With
    ``api_version=`` the ``api_version``/``kind`` fields become ``Literal`` defaults
    (``kind`` defaults to the class name); explicit Literal fields work too.
    """
    if isinstance(short_names, str) or isinstance(categories, str):
        raise ValueError("short_names and categories must be sequences of names")
    names, groups = tuple(short_names), tuple(categories)
    chosen = tuple(columns) if columns is not None else None

    def decorate(resource: R) -> R:
        if not isinstance(resource, type) or not issubclass(resource, Resource):
            raise TypeError("custom_resource requires a Resource subclass")
        if resource_options(resource) is not None:
            raise ValueError("custom_resource metadata is already declared on this class")
        if kind is not None and api_version is None:
            raise ValueError("kind requires api_version")
        if api_version is not None:
            _pin_type_fields(resource, api_version, kind or resource.__name__)
        resolved = _has_status_field(resource) if status is None else status
        options = CustomResourceOptions(
            plural, scope, singular, names, groups, resolved, chosen, resource=resource
        )
        setattr(resource, ATTRIBUTE, options)
        return resource

    return decorate


def _has_status_field(resource: type[Resource]) -> bool:
    return any((info.alias or name) == "status" for name, info in resource.model_fields.items())


def _pin_type_fields(resource: type[Resource], api_version: str, kind: str) -> None:
    """Make ``api_version``/``kind`` Literal fields defaulting to the declared values."""
    own = inspect.get_annotations(resource)
    fields = resource.model_fields
    for name, value in (("api_version", api_version), ("kind", kind)):
        current = fields[name]
        if name in own and current.default != value:
            raise ValueError(f"{name} conflicts with the resource field")
        pinned = copy.copy(current)
        pinned.annotation = cast(Any, Literal[value])
        pinned.default = value
        fields[name] = pinned
    resource.model_rebuild(force=True)
