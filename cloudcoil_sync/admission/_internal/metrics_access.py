"""`MetricsAccess`: who may read `/metrics`, decided by the API server and cached.

controller-runtime's `filters.WithAuthenticationAndAuthorization`, which kubebuilder's
scaffold puts in front of its metrics: the request's bearer token is sent in a TokenReview
(who is it?), then that user in a SubjectAccessReview for `get` on the path (a
`nonResourceURLs` rule, e.g. the generated `<app>.<namespace>-metrics-reader` ClusterRole).
As there, answers are cached: an authenticated token for a minute, an allowed decision for
5 minutes, a denied one (or an unknown token) for 30 seconds, so a scraper costs the API
server two requests per token and period. No token: 401; an unknown token: 401; denied: 403;
the API server unreachable or refusing the reviews: 500 (logged; nothing cached).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["MetricsAccess"]

log = logging.getLogger("cloudcoil_sync.admission.metrics_access")

TOKEN_REVIEWS = ("authentication.k8s.io", "v1", "tokenreviews")
ACCESS_REVIEWS = ("authorization.k8s.io", "v1", "subjectaccessreviews")
_UNKNOWN = object()  # a cached "not authenticated"


class MetricsAccess:
    """Decide `(Authorization header, path)` → HTTP status (200, 401, 403 or 500)."""

    def __init__(
        self,
        config: Config,
        *,
        token_ttl: float = 60.0,
        allow_ttl: float = 300.0,
        deny_ttl: float = 30.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.token_ttl, self.allow_ttl, self.deny_ttl = token_ttl, allow_ttl, deny_ttl
        self.max_entries = max_entries
        self.clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self.reviews = 0  # reviews sent to the API server

    def decide(self, authorization: str | None, path: str, verb: str = "get") -> int:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return 401
        digest = hashlib.sha256(token.encode()).hexdigest()  # tokens are never kept
        try:
            user = self._cached(("token", digest), lambda: self._authenticate(token))
            if user is _UNKNOWN:
                return 401
            allowed = self._cached(
                ("access", user, verb, path), lambda: self._authorize(user, verb, path)
            )
        except Exception as error:
            log.error("Cannot decide access to %s: %s", path, error)
            return 500
        return 200 if allowed else 403

    def _cached(self, key: Any, compute: Callable[[], tuple[Any, float]]) -> Any:
        now = self.clock()
        with self._lock:
            found = self._cache.get(key)
            if found is not None and found[0] > now:
                return found[1]
        value, ttl = compute()
        with self._lock:
            self._cache[key] = (now + ttl, value)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return value

    def _authenticate(self, token: str) -> tuple[Any, float]:
        review = self._create(
            TOKEN_REVIEWS,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return _UNKNOWN, self.deny_ttl
        user = status.get("user") or {}
        extra = tuple(
            sorted((key, tuple(values)) for key, values in (user.get("extra") or {}).items())
        )
        identity = (
            str(user.get("username", "")),
            str(user.get("uid", "")),
            tuple(user.get("groups") or ()),
            extra,
        )
        return identity, self.token_ttl

    def _authorize(self, user: Any, verb: str, path: str) -> tuple[bool, float]:
        username, uid, groups, extra = user
        spec: dict[str, Any] = {
            "user": username,
            "groups": list(groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if uid:
            spec["uid"] = uid
        if extra:
            spec["extra"] = {key: list(values) for key, values in extra}
        review = self._create(
            ACCESS_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        if not allowed:
            log.info("Denied %s %s to %s", verb, path, username)
        return allowed, self.allow_ttl if allowed else self.deny_ttl

    def _create(self, target: tuple[str, str, str], body: dict[str, Any]) -> dict[str, Any]:
        self.reviews += 1
        return self.config.client(target).create(body)
