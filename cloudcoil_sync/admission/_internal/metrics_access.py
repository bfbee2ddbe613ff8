"""`MetricsAccess`: who may read `/metrics`, decided by the API server and cached.

controller-runtime's `filters.WithAuthenticationAndAuthorization`, which kubebuilder's
scaffold puts in front of its metrics: the request's bearer token is sent in a TokenReview
(who is it?), then that user in a SubjectAccessReview for `get` on the path (a
`nonResourceURLs` rule, e.g. the generated `<app>.<namespace>-metrics-reader` ClusterRole).
As there, answers are cached: an authenticated token for a minute, an allowed decision for
5 minutes, a denied one (or an unknown token) for 30 seconds, so a scraper costs the API
server two requests per token and period. No token: 401; an unknown token: 401; denied: 403;
the API server unreachable or refusing the reviews: 500 (logged; nothing cached).

Beyond controller-runtime, junk must not turn into reviews one for one: positive and negative
answers are cached apart (junk tokens cannot push a scraper's decision out), concurrent
lookups of one token or decision share a single review, a client address may cause at most
`client_burst` reviews and then `client_rate` per second (past that: 429 with Retry-After),
and the reviews use a connection pool and rate limiter of their own (`review_qps`), so they
never take the budget of the operator's Lease renewals and controllers.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.admission._internal.lograte import ClientLog

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["MetricsAccess"]

log = logging.getLogger("cloudcoil_sync.admission.metrics_access")

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
_UNKNOWN = object()  # a cached "not authenticated"
_MISS = object()
_MAX_CLIENTS = 4096  # client addresses whose review budget is remembered


class _Limited(Exception):
    """The client address has used up its review budget."""


class _Flight:
    """One review in progress; others asking the same wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = _MISS
        self.error = ""


class MetricsAccess:
    """Decide `(Authorization header, path, client address)` → HTTP status (200, 401, 403,
    429 or 500); `close` releases the reviews' connections."""

    def __init__(
        self,
        config: Config,
        *,
        token_ttl: float = 60.0,
        allow_ttl: float = 300.0,
        deny_ttl: float = 30.0,
        max_entries: int = 1024,
        client_rate: float = 1.0,
        client_burst: int = 10,
        review_qps: float = 10.0,
        review_burst: int = 20,
        review_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.transport = config.transport.derived(
            qps=review_qps, burst=review_burst, pool_maxsize=4
        )
        self.token_ttl, self.allow_ttl, self.deny_ttl = token_ttl, allow_ttl, deny_ttl
        self.max_entries = max_entries
        self.client_rate, self.client_burst = client_rate, client_burst
        self.review_timeout = review_timeout
        self.clock = clock
        self._lock = threading.Lock()
        # Positive and negative answers apart: junk never evicts a scraper's entry.
        self._cache: dict[bool, OrderedDict[Any, tuple[float, Any]]] = {
            True: OrderedDict(),
            False: OrderedDict(),
        }
        self._flights: dict[Any, _Flight] = {}
        self._budgets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._errors = ClientLog(log)
        self.reviews = 0  # reviews sent to the API server
        self.limited = 0  # lookups refused for their client's budget (429)

    def close(self) -> None:
        self.transport.close()

    def decide(
        self, authorization: str | None, path: str, client: str = "", verb: str = "get"
    ) -> int:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return 401
        digest = hashlib.sha256(token.encode()).hexdigest()  # tokens are never kept
        try:
            user = self._lookup(("token", digest), client, lambda: self._authenticate(token))
            if user is _UNKNOWN:
                return 401
            allowed = self._lookup(
                ("access", user, verb, path), client, lambda: self._authorize(user, verb, path)
            )
        except _Limited:
            return 429
        except Exception as error:
            self._errors.log(logging.ERROR, client, "Cannot decide access to %s: %s", path, error)
            return 500
        return 200 if allowed else 403

    def _lookup(self, key: Any, client: str, compute: Callable[[], tuple[Any, float, bool]]) -> Any:
        """The cached answer for `key`, the one being computed for another caller, or a
        new one (`compute`: value, ttl, positive) within `client`'s budget."""
        now = self.clock()
        with self._lock:
            for positive in (True, False):
                found = self._cache[positive].get(key)
                if found is not None and found[0] > now:
                    return found[1]
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                if not self._take_budget(client, now):
                    self.limited += 1
                    raise _Limited
                flight = self._flights[key] = _Flight()
        if not leader:
            if not flight.done.wait(self.review_timeout) or flight.value is _MISS:
                raise RuntimeError(flight.error or "a concurrent review did not finish in time")
            return flight.value
        try:
            value, ttl, positive = compute()
        except Exception as error:
            flight.error = str(error) or type(error).__name__
            raise
        else:
            flight.value = value
            with self._lock:
                cache = self._cache[positive]
                cache[key] = (now + ttl, value)
                cache.move_to_end(key)
                while len(cache) > self.max_entries:
                    cache.popitem(last=False)
            return value
        finally:
            with self._lock:
                self._flights.pop(key, None)
            flight.done.set()

    def _take_budget(self, client: str, now: float) -> bool:
        """One review from `client`'s token bucket (under the lock); False if it is empty."""
        tokens, last = self._budgets.get(client, (float(self.client_burst), now))
        tokens = min(float(self.client_burst), tokens + (now - last) * self.client_rate)
        allowed = tokens >= 1.0
        self._budgets[client] = (tokens - 1.0 if allowed else tokens, now)
        self._budgets.move_to_end(client)
        while len(self._budgets) > _MAX_CLIENTS:
            self._budgets.popitem(last=False)
        return allowed

    def _authenticate(self, token: str) -> tuple[Any, float, bool]:
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
            return _UNKNOWN, self.deny_ttl, False
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
        return identity, self.token_ttl, True

    def _authorize(self, user: Any, verb: str, path: str) -> tuple[bool, float, bool]:
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
        return allowed, self.allow_ttl if allowed else self.deny_ttl, allowed

    def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.reviews += 1
        answer = self.transport.request_json(
            "POST", path, body=body, retries=1, read_timeout=self.review_timeout
        )
        if not isinstance(answer, dict):
            raise ValueError(f"the API server answered {path} with no object")
        return answer
