"""`Versions`: one kind served in several versions, converted hub-and-spoke.

Each version is its own pydantic model with its own ``@custom_resource`` (schema and printer
columns per version). One version is the hub; every other version (a spoke) converts to and
from the hub with two plain functions, so N versions need 2(N-1) functions, as in
controller-runtime. Definition errors are raised here, offline, naming the models.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync.crd._internal.decorator import resource_options

__all__ = ["VERSIONS_ATTRIBUTE", "Version", "Versions", "versions_of"]

VERSIONS_ATTRIBUTE = "__cloudcoil_versions__"


@dataclass(frozen=True)
class Version:
    """One version of a kind: its model, whether it is the hub, stored, served, deprecated.

    A spoke (``hub=False``) gives ``to_hub(spoke) -> hub`` and ``from_hub(hub) -> spoke``:
    plain functions of the models. ``deprecation_warning`` replaces the API server's
    default warning (``<group>/<version> <Kind> is deprecated``).
    """

    model: type[Resource]
    hub: bool = False
    storage: bool = False
    served: bool = True
    deprecated: bool = False
    deprecation_warning: str | None = None
    to_hub: Callable[[Any], Any] | None = None
    from_hub: Callable[[Any], Any] | None = None

    @property
    def name(self) -> str:
        return str(self.model.gvk().version)

    @property
    def api_version(self) -> str:
        return str(self.model.gvk().api_version)


class Versions:
    """The versions of one custom resource kind; ``CRD(Versions(...))`` generates it.

    Exactly one version is the hub and exactly one is stored (often the same one). Every
    model must declare ``@custom_resource`` with the same group, kind, plural and scope.
    Constructing it marks each model, so an `Application` whose controller reconciles any
    of the versions generates the one multi-version CRD.
    """

    def __init__(self, *versions: Version) -> None:
        if not versions or not all(isinstance(v, Version) for v in versions):
            raise TypeError("Versions takes Version(...) entries, at least one")
        self.versions: tuple[Version, ...] = versions
        label = ", ".join(v.model.__name__ for v in versions)
        self.label = f"Versions({label})"
        _check_models(self.label, versions)
        self.hub: Version = _one(self.label, versions, "hub", "Version(Model, hub=True)")
        self.storage: Version = _one(
            self.label, versions, "storage", "Version(Model, storage=True)"
        )
        _check_versions(self.label, versions, self.hub)
        self.by_version = {v.name: v for v in versions}
        self.by_model = {v.model: v for v in versions}
        for version in versions:
            setattr(version.model, VERSIONS_ATTRIBUTE, self)

    @staticmethod
    def of(model: type[Resource]) -> Versions | None:
        """The `Versions` ``model`` is one version of (its own class only), else None."""
        return versions_of(model)

    @property
    def models(self) -> tuple[type[Resource], ...]:
        return tuple(v.model for v in self.versions)

    @property
    def group(self) -> str:
        return str(self.hub.model.gvk().group)

    @property
    def kind(self) -> str:
        return str(self.hub.model.gvk().kind)

    @property
    def plural(self) -> str:
        options = resource_options(self.hub.model)
        assert options is not None  # checked in _check_models
        return options.plural

    @property
    def name(self) -> str:
        """The CRD's ``metadata.name``."""
        return f"{self.plural}.{self.group}"

    @property
    def conversion_path(self) -> str:
        """The conversion webhook's path for this kind: ``/convert/<plural>.<group>``."""
        return f"/convert/{self.name}"

    @property
    def multiple(self) -> bool:
        """More than one version: the CRD needs a conversion webhook."""
        return len(self.versions) > 1

    def __repr__(self) -> str:
        return self.label


def versions_of(model: type[Resource]) -> Versions | None:
    """The `Versions` a model is one version of (its own class only, never inherited)."""
    found = model.__dict__.get(VERSIONS_ATTRIBUTE)
    return found if isinstance(found, Versions) else None


def _one(label: str, versions: Sequence[Version], flag: str, how: str) -> Version:
    marked = [v for v in versions if getattr(v, flag)]
    if not marked:
        raise ValueError(f"{label}: no {flag} version; mark exactly one {how}")
    if len(marked) > 1:
        names = " and ".join(v.model.__name__ for v in marked)
        raise ValueError(f"{label}: two {flag} versions, {names}; mark exactly one {how}")
    return marked[0]


def _check_models(label: str, versions: Sequence[Version]) -> None:
    first: tuple[Any, ...] | None = None
    seen: dict[str, str] = {}
    for version in versions:
        model = version.model
        if not isinstance(model, type) or not issubclass(model, Resource):
            raise TypeError(f"{label}: {model!r} is not a Resource subclass")
        options = resource_options(model)
        if options is None or options.group is None:
            raise ValueError(
                f"{label}: {model.__name__} needs @custom_resource(api_version=..., plural=...)"
            )
        found = versions_of(model)
        if found is not None:
            raise ValueError(f"{label}: {model.__name__} is already a version of {found.label}")
        identity = (options.group, options.kind, options.plural, options.scope)
        if first is None:
            first = identity
        elif identity != first:
            raise ValueError(
                f"{label}: {model.__name__} differs from {versions[0].model.__name__} in "
                "group, kind, plural or scope; the versions of a kind share them"
            )
        name = str(options.version)
        if name in seen:
            raise ValueError(f"{label}: {seen[name]} and {model.__name__} are both version {name}")
        seen[name] = model.__name__


def _check_versions(label: str, versions: Sequence[Version], hub: Version) -> None:
    if not any(v.served for v in versions):
        raise ValueError(f"{label}: no served version")
    for version in versions:
        name = version.model.__name__
        if version.deprecation_warning is not None and not version.deprecated:
            raise ValueError(f"{label}: {name} has a deprecation_warning but is not deprecated")
        if version is hub:
            if version.to_hub is not None or version.from_hub is not None:
                raise ValueError(
                    f"{label}: the hub {name} converts to nothing; to_hub/from_hub belong "
                    "on the other versions"
                )
            continue
        for what in ("to_hub", "from_hub"):
            function = getattr(version, what)
            if function is None:
                raise ValueError(
                    f"{label}: {name} has no conversion path to the hub "
                    f"{hub.model.__name__}: pass {what}="
                )
            if not callable(function) or inspect.iscoroutinefunction(function):
                raise TypeError(f"{label}: {name}.{what} must be a plain function (def)")
