"""Request routing: URL → resource type and verb, authentication, authorization, handlers."""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

from cloudcoil_sync.client._internal import codec
from cloudcoil_sync.testing._internal import discovery, openapi, partial, protobuf, tables
from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.access_reviews import REVIEWS, review
from cloudcoil_sync.testing._internal.backend import AccessRecord, Backend, LogEntry
from cloudcoil_sync.testing._internal.crud import Req
from cloudcoil_sync.testing._internal.deletion import CRD_KEY
from cloudcoil_sync.testing._internal.http import BodyTooLarge, Exchange
from cloudcoil_sync.testing._internal.identity import (
    SELF_ACCESS_REVIEWS,
    impersonated,
    non_resource_reason,
    self_access_review,
)
from cloudcoil_sync.testing._internal.rbac import Attributes, User
from cloudcoil_sync.testing._internal.resources import ResourceType
from cloudcoil_sync.testing._internal.store import dumps
from cloudcoil_sync.testing._internal.tokens import token_request
from cloudcoil_sync.testing._internal.watch import Watch, serve

__all__ = ["LogEntry", "handle"]

JSON = dict[str, Any]
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
# A YAML body becomes at most this many JSON values (aliases are expanded, so a few bytes of
# anchors could otherwise stand for billions of them).
_MAX_YAML_VALUES = 1_000_000


class _Loader(_SafeLoader):  # type: ignore[misc]
    """Safe YAML as kube-apiserver reads it (sigs.k8s.io/yaml): an unquoted date stays a
    string; explicit tags with no JSON form (!!binary, !!timestamp, !!set) are refused."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
        for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
    }


@dataclass
class Route:
    rt: ResourceType
    namespace: str
    name: str
    subresource: str


def _parse_body(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    if "protobuf" in content_type:  # kubectl's typed clients (create, token, auth can-i)
        return protobuf.decode(raw)
    try:
        if "yaml" in content_type:
            return _json_tree(yaml.load(raw, Loader=_Loader))
        return codec.loads(raw)  # strict, as the API server: no NaN, valid UTF-8 only
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        raise st.bad_request(f"the body of the request could not be decoded: {exc}") from exc


def _json_tree(root: Any) -> Any:
    """A fresh JSON tree (no shared or cyclic parts) of decoded YAML; ValueError naming a
    value with no JSON form. Iterative: no depth limit but the value count."""
    if type(root) is not dict and type(root) is not list:
        return _json_scalar(root)
    tree: Any = {} if type(root) is dict else []
    stack: list[tuple[Any, Any]] = [(root, tree)]
    count = 0
    while stack:
        source, target = stack.pop()
        is_dict = type(source) is dict
        for key, value in source.items() if is_dict else enumerate(source):
            count += 1
            if count > _MAX_YAML_VALUES:
                raise ValueError(f"more than {_MAX_YAML_VALUES} values once aliases are expanded")
            if type(value) is dict or type(value) is list:
                copy: Any = {} if type(value) is dict else []
                stack.append((value, copy))
            else:
                copy = _json_scalar(value)
            if is_dict:
                target[_json_key(key)] = copy
            else:
                target.append(copy)
    return tree


def _json_scalar(value: Any) -> Any:
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is float and math.isfinite(value):
        return value
    shown = repr(value)[:40]
    raise ValueError(f"{shown} ({type(value).__name__}) has no JSON form")


def _json_key(key: Any) -> str:
    """A mapping key as sigs.k8s.io/yaml turns it into JSON: numbers and booleans as text."""
    if type(key) is str:
        return key
    if type(key) is bool:
        return "true" if key else "false"
    if type(key) is int or (type(key) is float and math.isfinite(key)):
        return str(key)
    raise ValueError(f"a mapping key {repr(key)[:40]} has no JSON form")


def _non_resource_access(emu: Backend, user: User, method: str, path: str) -> None:
    """kube-apiserver's RBAC for a non-resource path: anonymous users may get only the public
    information paths (system:public-info-viewer), authenticated ones discovery too."""
    if not user.admin and "system:authenticated" in user.groups and path == "/":
        return  # the path list: the emulator's own, open to any authenticated user
    verb = method.lower() if method != "HEAD" else "get"
    if non_resource_reason(emu.authorizer, user, verb, path) is None:
        message = f'forbidden: User "{user.name}" cannot {verb} path "{path}"'
        raise st.ApiError(403, "Forbidden", message, {})


def _route(emu: Backend, parts: list[str]) -> Route | None:
    """Parse ``api/v1/...`` or ``apis/<g>/<v>/...`` into a resource route."""
    if parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    namespace_sub = not group and len(rest) == 3 and rest[2] in ("status", "finalize")
    if rest[0] == "namespaces" and len(rest) >= 3 and not namespace_sub:
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    rt = emu.registry.get(group, version, plural)
    if rt is None or len(rest) > 3:
        return None
    if namespace and not rt.namespaced:
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in rt.subresources:
        return None
    return Route(rt, namespace, name, sub)


def _verb(method: str, route: Route, query: dict[str, str]) -> str:
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        return "get" if route.name else "list"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if route.name else "deletecollection",
    }.get(method, "")


def _discovery(emu: Backend, ex: Exchange, parts: list[str]) -> bool:
    accept = ex.headers.get("Accept", "")
    aggregated = any(
        "g=apidiscovery.k8s.io" in part
        and "v=v2;" in part + ";"
        and "as=APIGroupDiscoveryList" in part
        for part in accept.replace(" ", "").split(",")
    )
    body: JSON | None = None
    ctype = "application/json"
    path = "/".join(parts)
    if path == "version":
        body = discovery.version_info()
    elif path in ("healthz", "readyz", "livez"):
        ex.respond(200, b"ok", "text/plain; charset=utf-8")
        return True
    elif path == "api":
        if aggregated:
            body, ctype = discovery.aggregated(emu.registry, core=True), discovery.AGGREGATED
        else:
            body = discovery.api_versions(f"127.0.0.1:{emu.port}")
    elif path == "apis":
        if aggregated:
            body, ctype = discovery.aggregated(emu.registry, core=False), discovery.AGGREGATED
        else:
            body = discovery.group_list(emu.registry)
    elif parts[0] == "openapi" and parts[1:2] == ["v3"]:
        body = (
            openapi.index(emu.registry, emu.store)
            if len(parts) == 2
            else openapi.document(emu.registry, emu.store, "/".join(parts[2:]))
        )
    elif len(parts) == 2 and parts[0] == "api":
        body = discovery.resource_list(emu.registry, "", parts[1])
    elif len(parts) == 3 and parts[0] == "apis":
        body = discovery.resource_list(emu.registry, parts[1], parts[2])
    elif len(parts) == 2 and parts[0] == "apis":
        versions = emu.registry.groups().get(parts[1])
        if versions:
            entries = [{"groupVersion": f"{parts[1]}/{v}", "version": v} for v in versions]
            body = {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": parts[1],
                "versions": entries,
                "preferredVersion": entries[0],
            }
    else:
        return False
    if body is None:
        raise st.ApiError(404, "NotFound", "the server could not find the requested resource", {})
    ex.respond(200, dumps(body), ctype)
    return True


def handle(emu: Backend, ex: Exchange) -> None:
    """Answer one exchange (never raises)."""
    url = urlsplit(ex.target)
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    user: User | None = None

    def log(status: int) -> None:  # before the answer leaves, so clients see it logged
        emu.log_request(LogEntry(ex.method, url.path, query, user.name if user else "", status))

    ex.before_send = log
    try:
        user = emu.authorizer.authenticate(ex.headers.get("Authorization"))
        error, delay = emu.faults.take(ex.method, url.path)
        if delay:
            time.sleep(delay)
        if error is not None:
            raise error
        if user is None:  # answered without reading the body, as kube-apiserver does
            raise st.unauthorized()
        user = impersonated(emu.authorizer, user, ex.headers)
        _dispatch(emu, ex, url.path, query, user)
    except st.ApiError as err:
        _respond_error(ex, err)
    except BodyTooLarge as err:
        _respond_error(
            ex, st.ApiError(413, "RequestEntityTooLarge", f"Request entity too large: {err}")
        )
    except (OSError, ValueError):
        ex.close_connection = True
    except Exception:
        traceback.print_exc()
        _respond_error(ex, st.ApiError(500, "InternalError", "internal error in the emulator", {}))
    finally:
        if not ex.status:  # nothing was sent (the connection failed first)
            log(0)


def _respond_error(ex: Exchange, err: st.ApiError) -> None:
    if ex.streaming:
        return
    try:
        ex.respond(err.code, dumps(err.body()), headers=err.headers, warnings=err.warnings)
    except OSError:
        ex.close_connection = True


def _selected_name(query: dict[str, str]) -> str:
    """The name a list/watch is limited to by ``fieldSelector=metadata.name=X``, as
    kube-apiserver's RequestInfo takes it for authorization (so resourceNames rules apply)."""
    for term in (query.get("fieldSelector") or "").split(","):
        key, _, value = term.partition("=")
        if key.strip() == "metadata.name":  # "=" or "=="; "!=" leaves "metadata.name!"
            return value.removeprefix("=").strip()
    return ""


def _dispatch(emu: Backend, ex: Exchange, path: str, query: dict[str, str], user: User) -> None:
    parts = [unquote(p) for p in path.split("/") if p]  # names may be escaped (system%3Ax)
    route = _route(emu, parts) if parts[:1] in (["api"], ["apis"]) else None
    if route is None:
        _non_resource_access(emu, user, ex.method, "/" + "/".join(parts))
        if not parts:
            ex.respond(200, dumps({"paths": ["/api", "/apis", "/version"]}))
            return
        if _discovery(emu, ex, parts):
            return
        raise st.ApiError(404, "NotFound", "the server could not find the requested resource", {})
    verb = _verb(ex.method, route, query)
    if not verb:
        raise st.method_not_allowed()
    if route.rt.namespaced and not route.namespace and verb not in ("list", "watch"):
        raise st.ApiError(404, "NotFound", "the server could not find the requested resource", {})
    ctype = ex.headers.get("Content-Type", "application/json")
    name = route.name or (_selected_name(query) if verb in ("list", "watch") else "")
    attrs = Attributes(
        verb, route.rt.group, route.rt.plural, route.subresource, route.namespace, name
    )
    asks_itself = verb == "create" and route.rt.key == SELF_ACCESS_REVIEWS  # any user may
    allowed = asks_itself or emu.authorizer.allowed(user, attrs)
    if not user.admin:
        emu.log_access(AccessRecord(user.name, allowed=allowed, **dataclasses.asdict(attrs)))
    if not allowed:
        raise st.forbidden(
            user.name,
            verb,
            route.rt.plural,
            route.rt.group,
            name,
            route.namespace,
            route.subresource,
        )
    body = _parse_body(ex.body(), ctype)  # read once authorized, as kube-apiserver does
    req = Req(
        route.rt,
        route.namespace,
        route.name,
        route.subresource,
        query,
        body,
        ctype,
        ex.headers.get("User-Agent", ""),
        user,
    )
    if route.rt.deprecation:  # a deprecated CRD version warns on every request
        req.warnings.append(route.rt.deprecation)
    try:
        _execute(emu, ex, verb, req)
    except st.ApiError as err:  # a refused write still carries its decoding warnings
        err.warnings = req.warnings
        raise


def _execute(emu: Backend, ex: Exchange, verb: str, req: Req) -> None:
    objects = emu.objects
    if verb == "create" and req.rt.key == SELF_ACCESS_REVIEWS:  # answered, never stored
        ex.respond(201, dumps(self_access_review(emu.authorizer, req)))
        return
    if verb == "create" and req.rt.key in REVIEWS:  # answered, never stored
        ex.respond(201, dumps(review(emu.authorizer, req)))
        return
    if req.subresource in ("scale", "token"):
        if req.subresource == "token" and verb != "create":
            raise st.method_not_allowed()
        status, result = (
            emu.scale(verb, req) if req.subresource == "scale" else token_request(emu, req)
        )
        ex.respond(status, dumps(result))
        return
    if verb == "watch":
        _watch(emu, ex, req)
        return
    if verb in ("list", "get"):
        _read(emu, ex, verb, req)
        return
    slots = emu.latency
    if req.subresource and verb in ("create", "delete", "deletecollection"):
        raise st.method_not_allowed()
    if slots is not None:
        slots.serve(verb)  # before the write: its watch event leaves when it is answered
    if verb == "create" and not req.rt.builtin:
        _check_not_terminating(emu, req.rt)
    if verb in ("create", "update", "patch", "delete"):
        emu.admit(verb, req)
    if verb == "create":
        status, result = objects.create(req)
    elif verb == "update":
        status, result = objects.replace(req)
    elif verb == "patch":
        status, result = objects.patch(req)
    elif verb == "delete":
        status, result = objects.delete(req)
    else:
        status, result = 200, objects.delete_collection(req)
    ex.respond(status, _encode(emu, req, result), warnings=req.warnings)


def _check_not_terminating(emu: Backend, rt: ResourceType) -> None:
    """kube-apiserver refuses new custom resources while their CRD is being deleted."""
    crd = emu.store.get(CRD_KEY, "", f"{rt.plural}.{rt.group}")
    if crd is not None and crd["metadata"].get("deletionTimestamp"):
        message = "create not allowed while custom resource definition is terminating"
        raise st.ApiError(405, "MethodNotAllowed", message, {})


def _read(emu: Backend, ex: Exchange, verb: str, req: Req) -> None:
    """A list or get: the object(s), as a Table or as partial metadata when asked."""
    accept = ex.headers.get("Accept", "")
    table = tables.wants_table(accept)
    if table is not None:
        ex.respond(200, dumps(_table(emu, req, verb, table)), warnings=req.warnings)
        return
    metadata = partial.wanted(accept)
    if metadata is not None:
        partial.check(req.rt, metadata[0], listing=verb == "list")
    if verb == "list":
        body = emu.objects.list_body(req)
        if metadata is not None:
            body = partial.convert_list(body, metadata[1])
    elif metadata is not None:
        body = dumps(partial.convert_object(emu.objects.get(req), metadata[1]))
    else:
        body = _encode(emu, req, emu.objects.get(req))
    if emu.latency is not None:
        emu.latency.serve(verb, len(body) if verb == "list" else 0)
    ex.respond(200, body, warnings=req.warnings)


def _table(emu: Backend, req: Req, verb: str, api_version: str) -> JSON:
    if verb == "get":
        found = [emu.objects.get(req)]
        meta: JSON = {"resourceVersion": found[0]["metadata"].get("resourceVersion", "")}
    else:
        listed = codec.loads(emu.objects.list_body(req))
        meta = listed["metadata"]
        typed = {"kind": req.rt.kind, "apiVersion": req.rt.api_version}
        found = [{**typed, **item} for item in listed["items"]]
    include = req.query.get("includeObject") or "Metadata"
    return tables.table(req.rt, found, meta, emu.store, api_version, include)


def _encode(emu: Backend, req: Req, result: JSON) -> bytes:
    """The stored object's cached encoding when ``result`` is it (shared with watches/lists)."""
    meta = result.get("metadata") or {}
    entry = emu.store.entry(req.rt.key, meta.get("namespace", ""), meta.get("name", ""))
    if entry is not None and entry.obj is result:
        return entry.raw
    return dumps(result)


def _watch(emu: Backend, ex: Exchange, req: Req) -> None:
    query = dict(req.query)
    if req.name:
        selector = f"metadata.name={req.name}"
        existing = query.get("fieldSelector")
        query["fieldSelector"] = f"{existing},{selector}" if existing else selector
    try:
        float(query.get("timeoutSeconds") or 0)
        int(query.get("resourceVersion") or 0)
    except ValueError as exc:
        raise st.bad_request(f"invalid watch parameters: {exc}") from exc
    as_table = tables.wants_table(ex.headers.get("Accept", ""))
    metadata = None if as_table else partial.wanted(ex.headers.get("Accept", ""))
    if metadata is not None:
        partial.check(req.rt, metadata[0], listing=False)
    watch = Watch(req.rt, req.namespace)
    emu.watches.add(watch)
    try:
        write = ex.start_stream(warnings=req.warnings)
        if as_table is not None:  # kubectl get -w
            include = req.query.get("includeObject") or "Metadata"
            write = tables.table_events(write, req.rt, emu.store, as_table, include)
        elif metadata is not None:
            write = partial.convert_events(write, metadata[1])
        serve(emu.store, watch, query, write, emu.bookmark_interval, emu.stopping, ex.peer_gone)
        ex.end_stream(abort=watch.abort)
    finally:
        emu.watches.remove(watch)
