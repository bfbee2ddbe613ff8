"""Converting objects between the versions of a `Versions` kind (hub and spoke).

Lossless by default: when a spoke cannot hold everything of a hub object (``to_hub`` of
``from_hub`` of it differs from it), the hub's body (everything but ``apiVersion``, ``kind``
and ``metadata``) is kept as JSON in the spoke's ``STASH_ANNOTATION``; converting back to the
hub merges it in: a field the spoke changed wins, every other field comes from the stash,
and the annotation is removed (kubebuilder projects do this by hand with a
``<group>/conversion-data`` annotation). Only labels and annotations of ``metadata`` may be
changed by a conversion function; the rest is the input's, as kube-apiserver requires.
"""

from __future__ import annotations

import json
from typing import Any

from cloudcoil.resources import Resource

from cloudcoil_sync.crd._internal.versions import Version, Versions

__all__ = ["STASH_ANNOTATION", "ConversionError", "convert", "round_trip_problems"]

JSON = dict[str, Any]
STASH_ANNOTATION = "conversion.cloudcoil.io/hub"
_TYPE_KEYS = ("apiVersion", "kind", "metadata")
_MISSING: Any = object()


class ConversionError(ValueError):
    """An object cannot be converted (unknown version, the model rejects it, a function
    returned the wrong type)."""


def convert(versions: Versions, obj: JSON, desired_api_version: str) -> JSON:
    """``obj`` (a JSON object of any version of ``versions``) as ``desired_api_version``."""
    source = _version_of(versions, obj.get("apiVersion"), "object's apiVersion")
    target = _version_of(versions, desired_api_version, "desired apiVersion")
    if source is target:
        return obj
    hub = obj if source is versions.hub else _to_hub(versions, source, obj)
    return hub if target is versions.hub else _from_hub(versions, target, hub)


def round_trip_problems(versions: Versions, obj: Resource | JSON) -> list[str]:
    """What does not survive a round trip through every other version (empty: lossless).

    ``obj`` is an object of any version; it is converted to each other version and back,
    and the body and metadata compared with the original's.
    """
    raw = (
        obj.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(obj, Resource)
        else obj
    )
    source = _version_of(versions, raw.get("apiVersion"), "object's apiVersion")
    start = _dump(source.model.model_validate(raw))
    problems = []
    for other in versions.versions:
        if other is source:
            continue
        there = convert(versions, start, other.api_version)
        back = convert(versions, there, source.api_version)
        if _body(back) != _body(start) or _labels(back) != _labels(start):
            problems.append(
                f"{source.model.__name__} -> {other.model.__name__} -> "
                f"{source.model.__name__} changes the object: {_difference(start, back)}"
            )
    return problems


def _version_of(versions: Versions, api_version: Any, what: str) -> Version:
    group, _, name = str(api_version).rpartition("/")
    found = versions.by_version.get(name)
    if group != versions.group or found is None:
        raise ConversionError(f"{versions.label}: the {what} {api_version!r} is not one of them")
    return found


def _typed(version: Version, obj: JSON) -> Resource:
    try:
        return version.model.model_validate(obj)
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        raise ConversionError(
            f"{version.model.__name__} rejects the object: {str(error).splitlines()[0]}"
        ) from None


def _call(version: Version, what: str, value: Resource, expected: type[Resource]) -> JSON:
    function = getattr(version, what)
    result = function(value)
    if not isinstance(result, expected):
        raise ConversionError(
            f"{version.model.__name__}.{what} returned {type(result).__name__}, "
            f"not {expected.__name__}"
        )
    return _dump(result)


def _to_hub(versions: Versions, spoke: Version, obj: JSON) -> JSON:
    hub_model = versions.hub.model
    out = _call(spoke, "to_hub", _typed(spoke, obj), hub_model)
    annotations = dict((obj.get("metadata") or {}).get("annotations") or {})
    stashed = annotations.get(STASH_ANNOTATION)
    if stashed is not None:
        theirs = _stash(stashed)
        if theirs is not None:  # what the spoke did not change comes from the stash
            base_hub = {**theirs, **{k: out[k] for k in _TYPE_KEYS if k in out}}
            base_spoke = _call(spoke, "from_hub", _typed(versions.hub, base_hub), spoke.model)
            base = _call(spoke, "to_hub", _typed(spoke, base_spoke), hub_model)
            merged = _merge(_body(base), _body(out), theirs)
            out = {**{k: out[k] for k in _TYPE_KEYS if k in out}, **merged}
    return _with_metadata(obj, out, stash=None)


def _from_hub(versions: Versions, spoke: Version, hub: JSON) -> JSON:
    out = _call(spoke, "from_hub", _typed(versions.hub, hub), spoke.model)
    back = _call(spoke, "to_hub", _typed(spoke, out), versions.hub.model)
    stash = None
    if _body(back) != _body(_dump(_typed(versions.hub, hub))):
        stash = json.dumps(_body(hub), sort_keys=True, separators=(",", ":"))
    return _with_metadata(hub, out, stash=stash)


def _with_metadata(source: JSON, out: JSON, stash: str | None) -> JSON:
    """``out`` with the source's metadata, but the labels and annotations ``out`` set."""
    metadata = dict(source.get("metadata") or {})
    produced = out.get("metadata") or {}
    for key in ("labels", "annotations"):
        value = dict(produced.get(key) or {})
        if key == "annotations":
            value.pop(STASH_ANNOTATION, None)
            if stash is not None:
                value[STASH_ANNOTATION] = stash
        if value:
            metadata[key] = value
        else:
            metadata.pop(key, None)
    return {**out, "metadata": metadata}


def _dump(model: Resource) -> JSON:
    dumped: JSON = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _body(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in _TYPE_KEYS}


def _labels(obj: JSON) -> tuple[Any, Any]:
    metadata = obj.get("metadata") or {}
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if k != STASH_ANNOTATION
    }
    return metadata.get("labels") or {}, annotations


def _stash(text: Any) -> JSON | None:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None  # a damaged stash is ignored: the spoke's fields are all there is
    return value if isinstance(value, dict) else None


def _merge(base: Any, mine: Any, theirs: Any) -> Any:
    """Three-way merge of JSON values: ``mine`` where it differs from ``base``, else
    ``theirs``; objects key by key, lists and scalars as a whole."""
    if all(isinstance(v, dict) for v in (base, mine, theirs)):
        out = {}
        for key in {**theirs, **mine}:
            value = _merge(
                base.get(key, _MISSING), mine.get(key, _MISSING), theirs.get(key, _MISSING)
            )
            if value is not _MISSING:
                out[key] = value
        return out
    return mine if mine != base else theirs


def _difference(before: JSON, after: JSON) -> str:
    changed = sorted(
        key
        for key in {*before, *after}
        if key != "metadata" and before.get(key, _MISSING) != after.get(key, _MISSING)
    )
    return ", ".join(changed) if changed else "labels or annotations"
