"""The Kubernetes API client of cloudcoil_sync (requests-based, thread-safe).

``Config`` (explicit, kubeconfig, in-cluster) → ``config.client(Kind)`` → ``ResourceClient``.
"""

from cloudcoil_sync.client.api import ListResult, ResourceClient
from cloudcoil_sync.client.auth import Auth, FileToken, StaticToken
from cloudcoil_sync.client.config import DEFAULT_BURST, DEFAULT_QPS, Config
from cloudcoil_sync.client.errors import (
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
    WatchStreamError,
)
from cloudcoil_sync.client.exec_auth import ExecProvider
from cloudcoil_sync.client.rest import RESTMapping, UnknownKind, lookup, register
from cloudcoil_sync.client.watch import Watch, WatchEvent

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
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
    "ListResult",
    "NotFound",
    "RESTMapping",
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
    "WatchStreamError",
    "lookup",
    "register",
]
