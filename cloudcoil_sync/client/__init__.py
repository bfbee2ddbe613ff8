"""The Kubernetes API client of cloudcoil_sync (requests-based, thread-safe).

::

    config = Config(server, token=..., ca_data=...)   # or Config.from_kubeconfig(),
    config = Config.load()                            # Config.in_cluster(), Config.load()
    cms = config.client(ConfigMap)                    # ResourceClient[ConfigMap]
    cms.get("a"); cms.list(label_selector="x=y"); cms.watch(resource_version=rv)
    cms.create(obj); cms.replace(obj); cms.json_patch(name, ops); cms.merge_patch(name, p)
    cms.apply(obj, field_manager="me", force=True); cms.delete(name, uid=..., resource_version=...)
    cms.raw.get("a")                                  # plain JSON dicts (no pydantic)
    config.client(("example.com", "v1", "widgets"))   # unknown kinds: dicts, discovery
    config.close()

Errors are typed (:class:`NotFound`, :class:`Conflict`, ...; all :class:`ClientError`).
"""

from cloudcoil_sync.client._internal.api import ListResult, ResourceClient
from cloudcoil_sync.client._internal.auth import Auth, FileToken, StaticToken
from cloudcoil_sync.client._internal.config import Config
from cloudcoil_sync.client._internal.errors import (
    AlreadyExists,
    APIError,
    APITimeout,
    BadRequest,
    ClientError,
    ConfigError,
    Conflict,
    Expired,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ResourceConflict,
    ResourceNotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    WatchEventTooLarge,
    WatchStreamError,
)
from cloudcoil_sync.client._internal.exec_auth import ExecProvider
from cloudcoil_sync.client._internal.gate import WriteFenced, fenced
from cloudcoil_sync.client._internal.invalid import InvalidObject
from cloudcoil_sync.client._internal.rest import UnknownKind
from cloudcoil_sync.client._internal.watch import Watch, WatchEvent

__all__ = [
    "APIError",
    "APITimeout",
    "AlreadyExists",
    "Auth",
    "BadRequest",
    "ClientError",
    "Config",
    "ConfigError",
    "Conflict",
    "ExecProvider",
    "Expired",
    "FileToken",
    "Forbidden",
    "Gone",
    "Invalid",
    "InvalidObject",
    "ListResult",
    "NotFound",
    "ResourceClient",
    "ResourceConflict",
    "ResourceNotFound",
    "ServerError",
    "StaticToken",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "UnknownKind",
    "Watch",
    "WatchEvent",
    "WatchEventTooLarge",
    "WatchStreamError",
    "WriteFenced",
    "fenced",
]
