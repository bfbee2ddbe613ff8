"""``ResourceClient[T]``: typed operations on one kind (model class or ``(group, version,
plural)``), sharing the Config's pool; thread-safe.

Known model classes go in and come out as models; ``client.raw`` (and tuple-addressed kinds)
use plain JSON dicts, which is what informer stores keep (no pydantic cost).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from cloudcoil_sync.client._internal.invalid import build
from cloudcoil_sync.client._internal.rest import RESTMapping
from cloudcoil_sync.client._internal.watch import Watch

if TYPE_CHECKING:
    from cloudcoil_sync.client._internal.discovery import RESTMapper
    from cloudcoil_sync.client._internal.transport import Transport

__all__ = ["Connection", "ListResult", "ResourceClient"]

T = TypeVar("T")
JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
#: Extra read time beyond ``timeoutSeconds`` before a silent watch counts as dead.
WATCH_GRACE = 10.0
# Metadata-only reads (client-go's metadata client): kube-apiserver answers
# PartialObjectMetadata(List); the trailing plain JSON lets a server without it send whole
# objects, which the client then cuts down the same way.
_PARTIAL = "application/json;as=PartialObjectMetadata{};g=meta.k8s.io;v=v1,application/json"
ACCEPT_METADATA = _PARTIAL.format("")
ACCEPT_METADATA_LIST = _PARTIAL.format("List")


@dataclass
class ListResult(Generic[T]):
    """Items of a (fully paginated) list and the list's resourceVersion (to start a watch)."""

    items: list[T] = field(default_factory=list)
    resource_version: str = ""

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> T:
        return self.items[index]


def to_json(obj: Any) -> JSON:
    """A model or mapping as a JSON-ready dict (camelCase, no nulls for models)."""
    if hasattr(obj, "model_dump"):
        return cast(JSON, obj.model_dump(mode="json", by_alias=True, exclude_none=True))
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"expected a model or a dict, got {type(obj).__name__}")


def _meta(body: JSON) -> JSON:
    meta = body.get("metadata")
    return meta if isinstance(meta, dict) else {}


class Connection(Protocol):
    """What a client uses of its ``Config``: the pooled transport, the REST mapper and the
    default namespace (a protocol, so that ``config.py`` can build clients without a cycle)."""

    transport: Transport
    namespace: str

    @property
    def mapper(self) -> RESTMapper: ...


class ResourceClient(Generic[T]):
    """Operations on one kind. Obtain with ``config.client(Kind, namespace=None)``."""

    def __init__(
        self,
        config: Connection,
        target: Any,
        *,
        namespace: str | None = None,
        raw: bool = False,
        mapping: RESTMapping | None = None,
        metadata: bool = False,
    ) -> None:
        self.config = config
        self.namespace = namespace
        self._target = target
        self._transport = config.transport
        self._mapping = mapping
        self._raw: ResourceClient[JSON] | None = None
        self._metadata_only = metadata
        model = isinstance(target, type) and hasattr(target, "model_validate")
        self._model: Any = target if model and not (raw or metadata) else None

    # -- plumbing ------------------------------------------------------------------------
    @property
    def mapping(self) -> RESTMapping:
        """The REST mapping (resolved on first use; discovery only for unknown kinds)."""
        if self._mapping is None:
            self._mapping = self.config.mapper.resolve(self._target)
        return self._mapping

    @property
    def raw(self) -> ResourceClient[JSON]:
        """The same client returning plain JSON dicts."""
        if self._model is None:
            return self  # type: ignore[return-value]  # T is JSON: no cast call per use
        if self._raw is None:
            self._raw = ResourceClient(
                self.config, self._target, namespace=self.namespace, raw=True, mapping=self._mapping
            )
        return self._raw

    @property
    def metadata(self) -> ResourceClient[JSON]:
        """The same kind read as metadata only: every object it returns (gets, list
        pages, watch events, write answers) is ``{"apiVersion", "kind", "metadata"}``
        of this kind, and reads ask the server for ``PartialObjectMetadata`` so that it
        sends no spec, data or status."""
        return ResourceClient(
            self.config,
            self._target,
            namespace=self.namespace,
            mapping=self._mapping,
            metadata=True,
        )

    def _decode(self, body: JSON) -> T:
        # No typing.cast here: a Python call per object decoded (T is JSON or the model).
        if self._metadata_only:
            return self._cut(body)  # type: ignore[return-value]
        if self._model is None:
            return body  # type: ignore[return-value]
        decoded: T = build(self._model, body)  # InvalidObject, naming it and its fields
        return decoded

    def _ns(self, namespace: str | None, body: JSON | None = None) -> str | None:
        if not self.mapping.namespaced:
            return None
        if namespace:
            return namespace
        if body is not None and _meta(body).get("namespace"):
            return str(_meta(body)["namespace"])
        return self.namespace or self.config.namespace

    def _path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        return self.mapping.path(namespace, name, sub)

    @staticmethod
    def _name(body: JSON) -> str:
        name = _meta(body).get("name")
        if not name:
            raise ValueError("the object has no metadata.name")
        return str(name)

    def _cut(self, body: JSON) -> JSON:
        """``body`` as this kind's metadata alone (PartialObjectMetadata names itself)."""
        mapping = self.mapping
        return {"apiVersion": mapping.api_version, "kind": mapping.kind, "metadata": _meta(body)}

    def _accept(self, partial: str) -> str | None:
        return partial if self._metadata_only else None

    def _send(self, method: str, path: str, **kwargs: Any) -> JSON:
        answer: JSON = self._transport.request_json(method, path, **kwargs)  # Any: no cast call
        return answer

    @staticmethod
    def _write_params(dry_run: bool, **extra: Any) -> dict[str, Any]:
        params = {k: v for k, v in extra.items() if v is not None}
        if dry_run:
            params["dryRun"] = "All"
        return params

    # -- reads ---------------------------------------------------------------------------
    def get(self, name: str, *, namespace: str | None = None, subresource: str | None = None) -> T:
        """GET one object (``subresource="status"`` returns the object too)."""
        path = self._path(self._ns(namespace), name, subresource)
        return self._decode(self._send("GET", path, accept=self._accept(ACCEPT_METADATA)))

    def list(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        resource_version: str | None = None,
    ) -> ListResult[T]:
        """List every page (follows ``continue``)."""
        result: ListResult[T] = ListResult()
        for page in self.pages(
            namespace=namespace,
            all_namespaces=all_namespaces,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            resource_version=resource_version,
        ):
            result.items.extend(page.items)
            result.resource_version = page.resource_version
        return result

    def pages(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        resource_version: str | None = None,
    ) -> Iterator[ListResult[T]]:
        """The list one page (of up to ``limit`` items) at a time, following ``continue``:
        memory holds one page, not the whole list. Each page carries the list's
        resourceVersion."""
        ns = None if all_namespaces else self._ns(namespace)
        path = self._path(ns)
        params: dict[str, Any] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit or None,
            "resourceVersion": resource_version,
        }
        mapping = self.mapping
        accept = self._accept(ACCEPT_METADATA_LIST)
        while True:
            body = self._send("GET", path, params=params, accept=accept)
            page: ListResult[T] = ListResult()
            for item in body.get("items") or []:
                item.setdefault("apiVersion", mapping.api_version)
                item.setdefault("kind", mapping.kind)
                page.items.append(self._decode(item))
            meta = _meta(body)
            page.resource_version = str(meta.get("resourceVersion") or "")
            del body
            yield page
            token = meta.get("continue")
            if not token:
                return
            params = {**params, "continue": token, "resourceVersion": None}

    def watch(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        read_timeout: float | None = None,
    ) -> Watch:
        """Open a watch stream (events carry raw dicts); close it when done."""
        ns = None if all_namespaces else self._ns(namespace)
        params: dict[str, Any] = {
            "watch": True,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "resourceVersion": resource_version,
            "timeoutSeconds": int(timeout_seconds),
            "allowWatchBookmarks": True if allow_bookmarks else None,
        }
        return Watch(
            self._transport,
            self._path(ns),
            params,
            read_timeout=read_timeout or timeout_seconds + WATCH_GRACE,
            resource_version=resource_version,
            accept=self._accept(ACCEPT_METADATA),
            decode=self._cut if self._metadata_only else None,
        )

    # -- writes --------------------------------------------------------------------------
    def create(
        self,
        obj: Any,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> T:
        """POST a new object."""
        body = to_json(obj)
        params = self._write_params(dry_run, fieldManager=field_manager)
        path = self._path(self._ns(namespace, body))
        return self._decode(self._send("POST", path, params=params, body=body))

    def replace(
        self,
        obj: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> T:
        """PUT the whole object (its ``resourceVersion``, if set, guards against conflicts)."""
        body = to_json(obj)
        path = self._path(self._ns(namespace, body), self._name(body), subresource)
        params = self._write_params(dry_run, fieldManager=field_manager)
        return self._decode(self._send("PUT", path, params=params, body=body))

    def replace_status(self, obj: Any, *, namespace: str | None = None, dry_run: bool = False) -> T:
        """PUT the ``status`` subresource."""
        return self.replace(obj, namespace=namespace, subresource="status", dry_run=dry_run)

    def _patch(
        self,
        name: str,
        body: Any,
        content_type: str,
        namespace: str | None,
        subresource: str | None,
        params: dict[str, Any],
    ) -> T:
        path = self._path(self._ns(namespace), name, subresource)
        return self._decode(
            self._send("PATCH", path, params=params, body=body, content_type=content_type)
        )

    def json_patch(
        self,
        name: str,
        ops: Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> T:
        """RFC 6902 JSON patch; a failing ``test`` op raises ``Invalid`` (422)."""
        params = self._write_params(dry_run, fieldManager=field_manager)
        return self._patch(name, list(ops), JSON_PATCH, namespace, subresource, params)

    def merge_patch(
        self,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> T:
        """RFC 7386 JSON merge patch (``None`` values delete keys)."""
        params = self._write_params(dry_run, fieldManager=field_manager)
        return self._patch(name, dict(patch), MERGE_PATCH, namespace, subresource, params)

    def apply(
        self,
        obj: Any,
        *,
        field_manager: str,
        force: bool = False,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> T:
        """Server-side apply of the fields in ``obj`` owned by ``field_manager``."""
        if not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        body = to_json(obj)
        _meta(body).pop("managedFields", None)
        params = self._write_params(dry_run, fieldManager=field_manager, force=force or None)
        ns = self._ns(namespace, body)
        path = self._path(ns, self._name(body), subresource)
        return self._decode(
            self._send("PATCH", path, params=params, body=body, content_type=APPLY_PATCH)
        )

    def delete(
        self,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """DELETE with optional preconditions; returns the server's answer as a dict (the
        object, still present while finalizers run, or a ``Status``)."""
        options: JSON = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        return self._send("DELETE", self._path(self._ns(namespace), name), body=options)

    # -- scale ---------------------------------------------------------------------------
    def _scale(self, body: JSON) -> Any:
        if self._model is None:
            return body
        from cloudcoil.models.kubernetes.autoscaling.v1 import Scale

        return Scale.model_validate(body)

    def get_scale(self, name: str, *, namespace: str | None = None) -> Any:
        """The ``scale`` subresource (an autoscaling/v1 ``Scale``; a dict on raw clients)."""
        return self._scale(self._send("GET", self._path(self._ns(namespace), name, "scale")))

    def patch_scale(
        self, name: str, replicas: int, *, namespace: str | None = None, dry_run: bool = False
    ) -> Any:
        """Set ``spec.replicas`` through the ``scale`` subresource."""
        path = self._path(self._ns(namespace), name, "scale")
        body = {"spec": {"replicas": int(replicas)}}
        params = self._write_params(dry_run)
        return self._scale(
            self._send("PATCH", path, params=params, body=body, content_type=MERGE_PATCH)
        )

    def __repr__(self) -> str:
        return f"ResourceClient({self._target!r}, namespace={self.namespace!r})"
