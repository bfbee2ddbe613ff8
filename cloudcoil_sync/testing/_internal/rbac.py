"""Authentication by bearer token and RBAC authorization from the stored Roles and bindings."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync.testing._internal.store import Store, WatchEvent

__all__ = ["MASTERS", "Attributes", "Authorizer", "Grant", "User"]

JSON = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
# kube-apiserver's reason for system:masters (its bootstrap binding).
MASTERS = (
    'RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" '
    'to Group "system:masters"'
)
# (namespace or None for cluster-wide, rules, the reason a grant from it is given)
Grant = tuple[str | None, list[JSON], str]


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    admin: bool = False


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


def _has(values: list[str] | None, wanted: str) -> bool:
    return bool(values) and ("*" in values or wanted in values)  # type: ignore[operator]


def rule_allows(rule: JSON, attrs: Attributes) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not _has(rule.get("apiGroups"), attrs.group):
        return False
    resources = rule.get("resources") or []
    wanted = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    sub_any = f"*/{attrs.subresource}" if attrs.subresource else ""
    if not ("*" in resources or wanted in resources or (sub_any and sub_any in resources)):
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(attrs.name) and attrs.name in names)


class Authorizer:
    """Token → user, and (user, request attributes) → allowed, cached until RBAC changes."""

    def __init__(self, store: Store, admin_token: str) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._tokens: dict[str, User] = {
            admin_token: User("system:admin", ("system:masters", "system:authenticated"), True)
        }
        self._cache: dict[User, list[Grant]] = {}
        store.listeners.append(self._observe)

    # -- authentication ----------------------------------------------------------------------
    def add_token(self, token: str, user: str, groups: tuple[str, ...] | list[str] = ()) -> None:
        all_groups = tuple(dict.fromkeys([*groups, "system:authenticated"]))
        with self._lock:
            self._tokens[token] = User(user, all_groups)

    def service_account_token(self, namespace: str, name: str) -> str:
        token = "sa-" + secrets.token_urlsafe(24)
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
        self.add_token(token, f"system:serviceaccount:{namespace}:{name}", groups)
        return token

    def tokens(self) -> dict[str, User]:
        """Every accepted token but the admin's, with its user (for saving state)."""
        with self._lock:
            return {token: user for token, user in self._tokens.items() if not user.admin}

    def authenticate(self, header: str | None) -> User | None:
        """The user for an ``Authorization`` header; ``None`` for an unknown token."""
        if not header:
            return User("system:anonymous", ("system:unauthenticated",))
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        with self._lock:
            return self._tokens.get(token.strip())

    def account_uid(self, username: str) -> str:
        """The uid of the ServiceAccount ``username`` names (``""`` for other users)."""
        parts = username.split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            return ""
        account = self.store.get(("", "serviceaccounts"), parts[2], parts[3])
        return str(((account or {}).get("metadata") or {}).get("uid", ""))

    # -- authorization -----------------------------------------------------------------------
    def _observe(self, event: WatchEvent) -> None:
        if event.key[0] == RBAC:
            with self._lock:
                self._cache.clear()

    def _matching(self, binding: JSON, user: User, binding_ns: str) -> JSON | None:
        for subject in binding.get("subjects") or []:
            if self._subject_matches(subject, user, binding_ns):
                return dict(subject)
        return None

    def _subject_matches(self, subject: JSON, user: User, binding_ns: str) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User":
            return name == user.name
        if kind == "Group":
            return name in user.groups
        if kind == "ServiceAccount":
            ns = subject.get("namespace") or binding_ns
            return user.name == f"system:serviceaccount:{ns}:{name}"
        return False

    def _role_rules(self, ref: JSON, namespace: str) -> list[JSON]:
        if ref.get("kind") == "ClusterRole":
            role = self.store.get((RBAC, "clusterroles"), "", ref.get("name", ""))
        else:
            role = self.store.get((RBAC, "roles"), namespace, ref.get("name", ""))
        return list((role or {}).get("rules") or [])

    def _grants(self, user: User) -> list[Grant]:
        with self._lock:
            cached = self._cache.get(user)
        if cached is not None:
            return cached
        grants: list[Grant] = []
        for plural, kind in (
            ("clusterrolebindings", "ClusterRoleBinding"),
            ("rolebindings", "RoleBinding"),
        ):
            entries, _ = self.store.scan((RBAC, plural), None)
            for entry in entries:
                binding = entry.obj
                ns = binding["metadata"].get("namespace", "")
                subject = self._matching(binding, user, ns)
                if subject is None:
                    continue
                ref = binding.get("roleRef") or {}
                reason = _reason(kind, binding["metadata"].get("name", ""), ns, ref, subject)
                grants.append((ns or None, self._role_rules(ref, ns), reason))
        with self._lock:
            self._cache[user] = grants
        return grants

    def grants(self, user: User) -> list[tuple[str | None, list[JSON]]]:
        """(namespace or None for cluster-wide, rules) of every binding naming `user`."""
        return [(scope, rules) for scope, rules, _ in self._grants(user)]

    def explained_grants(self, user: User) -> list[Grant]:
        """As ``grants``, each with the reason an answer it allows gives."""
        return self._grants(user)

    def allowed(self, user: User, attrs: Attributes) -> bool:
        return self.reason(user, attrs) is not None

    def reason(self, user: User, attrs: Attributes) -> str | None:
        """Why ``user`` may do ``attrs``, as kube-apiserver's RBAC says it; None if it may not."""
        if user.admin or "system:masters" in user.groups:
            return MASTERS
        for scope, rules, reason in self._grants(user):
            if scope is not None and scope != attrs.namespace:
                continue
            if any(rule_allows(rule, attrs) for rule in rules):
                return reason
        return None


def _reason(kind: str, name: str, namespace: str, ref: JSON, subject: JSON) -> str:
    where = f"{name}/{namespace}" if namespace else name
    who = subject.get("name", "")
    if subject.get("kind") == "ServiceAccount":
        who = f"{who}/{subject.get('namespace') or namespace}"
    return (
        f'RBAC: allowed by {kind} "{where}" of {ref.get("kind", "")} "{ref.get("name", "")}" '
        f'to {subject.get("kind", "")} "{who}"'
    )
