"""What goes wrong with a Lease, said at WARNING with what to do, without flooding the log.

An election retries every `retry_period` (2 s): a missing namespace, a denied request or an
unreachable API server would otherwise be repeated every 2 s (or hidden at DEBUG, as a
missing namespace was: a 404 on the create is not a lost race). Each kind of problem is
logged at once, then at most every `interval` seconds while it lasts (with how many attempts
failed meanwhile); once the Lease API answers again, that is said once at INFO.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from cloudcoil_sync._internal.throttle import Throttle
from cloudcoil_sync.client import APIError, TransportError

__all__ = ["LeaseProblems", "advice"]

logger = logging.getLogger("cloudcoil_sync.controller.leader")

REPEAT_INTERVAL = 30.0


def advice(error: BaseException, name: str, namespace: str, *, creating: bool = False) -> str:
    """One sentence: what failed on Lease `namespace/name` and what to do about it."""
    lease = f"Lease {namespace}/{name}"
    code = error.status_code if isinstance(error, APIError) else None
    if creating and code == 404:
        return (
            f"cannot create {lease}: namespace {namespace!r} does not exist. Create it "
            f"(kubectl create namespace {namespace}) or give LeaderElection(namespace=...) "
            "an existing one"
        )
    if code == 403:
        return (
            f"RBAC denies {lease}: grant get, create and update on leases "
            f"(coordination.k8s.io) in namespace {namespace!r} to the operator's "
            f"ServiceAccount (the generated Role does). {error}"
        )
    if code == 401:
        return f"the API server rejects the credentials while electing with {lease}: {error}"
    if isinstance(error, TransportError):
        return (
            f"cannot reach the API server to elect with {lease}: {error}. Check the "
            "kubeconfig's server address, the network and the server itself"
        )
    if isinstance(error, APIError):
        return f"the API server failed a request for {lease}: {error}"
    return f"{lease}: {error}"


class LeaseProblems:
    """Rate-limited WARNINGs for one candidate's Lease (thread-safe enough: the lease
    thread is the only writer)."""

    def __init__(
        self,
        name: str,
        namespace: str,
        *,
        interval: float = REPEAT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = name
        self._namespace = namespace
        self._throttle = Throttle(interval, clock=clock)

    def report(self, error: BaseException, *, creating: bool = False, doing: str = "") -> None:
        """Log `error` with advice: at once the first time, then every `interval`."""
        repeats = self._throttle.passes(f"{type(error).__name__}:{creating}")
        if repeats is None:
            return
        text = advice(error, self._name, self._namespace, creating=creating)
        again = f" ({repeats} more attempts failed the same way)" if repeats else ""
        logger.warning("Leader election%s: %s; retrying%s", doing, text, again)

    def cleared(self) -> None:
        """The Lease API answered: say so once if problems were reported."""
        if self._throttle:
            self._throttle.clear()
            logger.info("Lease %s/%s: the API server answers again", self._namespace, self._name)
