"""``uninstall``: remove what ``install`` applied, in the safe order, waiting for each.

Admission registrations go first (so no request is sent to a server that is going away), then
the Deployment (foreground deletion: its pods go before their permissions), Service, RBAC
(bindings before roles), ServiceAccount and the leader-election Lease; CRDs only with
``include_crds`` (deleting a CRD deletes every custom resource of it). An object is deleted
only if it carries the ``cloudcoil.io/installed-by: <namespace>/<app>`` annotation, which
``install`` sets on what it creates and never on an object it found in place (the Lease
whatever it carries: the operator's replicas may have created it); other same-named objects
are left alone and reported. Field managers cannot decide it: kube-apiserver records none for
an object applied with only its name (a ServiceAccount), and an adopted object lists the
installer's manager as well. Nothing here depends on how the Deployment would be built (a
``HealthServer`` bound to 127.0.0.1 for local runs does not stop an uninstall). Each deletion
is waited for until the object is gone, all within ``timeout``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import click

from cloudcoil_sync.application._internal.cli import Operator, operation_options, run_operation
from cloudcoil_sync.application._internal.extras import removal_identities
from cloudcoil_sync.application._internal.manifests import (
    INSTALLED_BY,
    Definition,
    assemble,
    installed_by,
)
from cloudcoil_sync.application._internal.options import ManifestOptions
from cloudcoil_sync.application._internal.progress import (
    InstallTimeout,
    Operation,
    Steps,
    describe,
    field_manager,
)
from cloudcoil_sync.client import ClientError, NotFound, UnknownKind

__all__ = ["Removed", "command", "removal_order", "uninstall"]

JSON = dict[str, Any]
#: Marks the identities of optional objects (never sent): skipped quietly when absent.
OPTIONAL = "cloudcoil.io/optional"
#: Stands in for the CA when listing object names: it never leaves this process.
_PLACEHOLDER_CA = b"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"
_ORDER = (
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "Deployment",
    "Certificate",
    "Issuer",
    "Service",
    "ClusterRoleBinding",
    "RoleBinding",
    "ClusterRole",
    "Role",
    "ServiceAccount",
    "Lease",
    "CustomResourceDefinition",
)


@dataclass
class Removed:
    """One object's outcome: ``deleted``, ``absent``, ``left`` (not ours) or ``kept`` (CRD);
    with ``dry_run``, ``deleted`` means it would be deleted."""

    object: str
    action: str
    detail: str = ""

    def dry_run_line(self) -> str:
        word = {"deleted": "would delete", "left": "would leave", "kept": "would keep"}
        text = f"{word.get(self.action, self.action)} {self.object}"
        return text + (f" ({self.detail})" if self.detail else "")


def removal_order(definition: Definition) -> list[JSON]:
    """Every object ``install`` can apply for ``definition``, in removal order (CRDs last);
    the optional ones (`extras`) carry `OPTIONAL`."""
    webhook = definition.webhook is not None
    # Only names matter: the Deployment is not built (its checks are for running in a Pod).
    documents = assemble(
        definition, ManifestOptions(ca_bundle=_PLACEHOLDER_CA if webhook else None)
    )
    name, namespace = definition.name, definition.namespace
    documents.append(_identity("apps/v1", "Deployment", name, namespace))
    if definition.lease is not None:
        lease_name, lease_namespace = definition.lease
        lease = _identity(
            "coordination.k8s.io/v1", "Lease", lease_name, lease_namespace or namespace
        )
        documents.append(lease)
    for optional in removal_identities(name, namespace):
        optional["metadata"]["annotations"] = {OPTIONAL: "true"}
        documents.append(optional)
    rank = {kind: i for i, kind in enumerate(_ORDER)}
    return sorted(documents, key=lambda d: rank.get(d["kind"], len(_ORDER)))


def _identity(api_version: str, kind: str, name: str, namespace: str) -> JSON:
    return {"apiVersion": api_version, "kind": kind, "metadata": _meta(name, namespace)}


def _meta(name: str, namespace: str) -> JSON:
    return {"name": name, "namespace": namespace}


def uninstall(
    definition: Definition, *, include_crds: bool = False, operation: Operation | None = None
) -> list[Removed]:
    """Delete what ``install`` applied (see the module docstring), as ``operation`` says;
    returns each outcome."""
    operation = operation or Operation()
    operation.check("Uninstall")
    documents = removal_order(definition)
    with operation.connection(definition.namespace) as cfg:
        remover = _Remover(cfg, field_manager(definition.name), operation)
        remover.owner = installed_by(definition.name, definition.namespace)
        return remover.run(documents, include_crds)


class _Remover(Steps):
    verb = "removed"
    owner = ""  # the INSTALLED_BY value of this operator's objects

    def run(self, documents: list[JSON], include_crds: bool) -> list[Removed]:
        # An optional object counts as a step only once found (most installs have none).
        self.begin([d for d in documents if not _optional(d)])
        results = []
        for doc in documents:
            what = describe(doc)
            result: Removed | None
            if doc["kind"] == "CustomResourceDefinition" and not include_crds:
                result = Removed(what, "kept", "pass --include-crds to delete it")
                self.progress.line(f"kept {what}: CRDs are deleted only with --include-crds")
            else:
                if self.deadline.expired:
                    raise self.fail(self.timed_out(f"before removing {what}"), InstallTimeout)
                result = self._remove(doc)
            if not _optional(doc):
                self.finished(what)
            elif result is not None:
                self.done.append(what)
            if result is not None:
                results.append(result)
        self._summary(results)
        return results

    def _remove(self, doc: JSON) -> Removed | None:
        """The outcome; None for an optional object that is absent (or not served)."""
        what = describe(doc)
        meta = doc["metadata"]
        name, namespace = meta["name"], meta.get("namespace")
        optional = _optional(doc)
        try:
            try:
                mapping = self.config.mapper.resolve(doc)
            except UnknownKind:
                if optional:  # e.g. no cert-manager in this cluster: nothing of it to remove
                    return None
                raise
            client = self.config.client((mapping.group, mapping.version, mapping.plural))
            current = _get(client, name, namespace)
            if current is None:
                if optional:
                    return None
                self.progress.line(f"absent {what}")
                return Removed(what, "absent")
            # The Lease is the replicas' own (created by install or by the first of them).
            detail = None if doc["kind"] == "Lease" else self._not_ours(current)
            if detail is not None:
                self.progress.line(f"left {what} alone: {detail}")
                return Removed(what, "left", detail)
            policy = "Foreground" if doc["kind"] == "Deployment" else "Background"
            uid = current["metadata"].get("uid")
            with contextlib.suppress(NotFound):
                client.delete(
                    name,
                    namespace=namespace,
                    uid=uid,
                    propagation_policy=policy,
                    dry_run=self.dry_run,
                )
        except (ClientError, UnknownKind) as exc:
            raise self.fail(f"removing {what} failed: {exc}") from None
        if not self.dry_run:
            self.progress.line(f"deleted {what}")
            self._wait_gone(client, what, name, namespace, uid)
        return Removed(what, "deleted")

    def _not_ours(self, current: JSON) -> str | None:
        """Why ``current`` is not this install's (None: it is): it must carry the
        INSTALLED_BY annotation with this operator's value."""
        found = (current["metadata"].get("annotations") or {}).get(INSTALLED_BY)
        if found == self.owner:
            return None
        if found is not None:
            return f"installed by {found}, not {self.owner} ({INSTALLED_BY})"
        managers = _managers(current)
        return f"not installed by {self.manager}: no {INSTALLED_BY} annotation" + (
            f"; managed by {', '.join(managers)}" if managers else ""
        )

    def _wait_gone(self, client: Any, what: str, name: str, ns: str | None, uid: Any) -> None:
        def poll() -> tuple[bool, str]:
            try:
                obj = _get(client, name, ns)
            except ClientError as exc:
                raise self.fail(f"reading {what} failed: {exc}") from None
            if obj is None or obj["metadata"].get("uid") != uid:
                return True, ""
            finalizers = obj["metadata"].get("finalizers") or []
            return False, "terminating" + (
                f" (finalizers: {', '.join(finalizers)})" if finalizers else ""
            )

        self.wait(what, "gone", poll)

    def _summary(self, results: list[Removed]) -> None:
        counts = {a: sum(r.action == a for r in results) for a in ("deleted", "left", "kept")}
        words = {"deleted": "deleted", "left": "left alone", "kept": "CRD(s) kept"}
        if self.dry_run:
            words["deleted"] = "would be deleted"
        parts = [f"{n} {words[a]}" for a, n in counts.items() if n]
        absent = sum(r.action == "absent" for r in results)
        if absent:
            parts.append(f"{absent} already absent")
        seconds = self.progress.elapsed()
        if self.dry_run:
            self.progress.line(f"dry run: {', '.join(parts)}; nothing was changed")
        elif not counts["deleted"]:
            self.progress.line(f"uninstall: nothing to remove ({', '.join(parts)})")
        else:
            self.progress.line(f"uninstalled in {seconds:.1f} s: {', '.join(parts)}")


def _optional(doc: JSON) -> bool:
    return OPTIONAL in (doc["metadata"].get("annotations") or {})


def _managers(obj: JSON) -> list[str]:
    """Field managers of the object itself (status writers such as controllers excluded)."""
    entries = obj["metadata"].get("managedFields") or []
    return sorted({str(m.get("manager")) for m in entries if not m.get("subresource")})


def _get(client: Any, name: str, namespace: str | None) -> JSON | None:
    try:
        obj: JSON = client.get(name, namespace=namespace)
    except NotFound:
        return None
    return obj


# -- command line -------------------------------------------------------------------------------


def command(app: Operator) -> click.Command:
    """``uninstall [--include-crds] [--timeout] [--dry-run] [--quiet]``."""

    @click.command("uninstall", help="Remove what install applied (CRDs only if asked).")
    @click.option(
        "--include-crds",
        is_flag=True,
        help="Also delete the CRDs, and with them every custom resource of them.",
    )
    @operation_options("removal", "Server-side dry run: show what would go.")
    def uninstall_command(include_crds: bool, **params: Any) -> None:
        run_operation(uninstall, app, params, include_crds=include_crds)

    return uninstall_command
