"""``install``: server-side apply of the manifests, in order, with waits and progress.

CRDs first, each waited for until Established; then ServiceAccount, RBAC, Service and
Deployment (manifest order), waiting for a cert-manager Certificate to be issued (with
``--cert-manager``) and for the Deployment's current revision to be available;
webhook registrations last, so admission is enabled only once its server serves; finally the
CRDs' kinds are rediscovered. Every write is server-side apply with the field manager
``cloudcoil-<app>``, but one: with leader election, a first install (no Deployment yet)
creates the Lease *released* (no holder) unless it exists, so the first replica takes it at
once instead of waiting out a lease duration on a Lease it created itself (see
``controller.leader``); an existing Lease is never touched. The whole run is bounded by
``timeout``; a failure leaves what was applied (no rollback) and says what was done and what
was pending. A repeated run changes nothing.
``dry_run`` sends server-side dry-run applies and reports what each would change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from cloudcoil_sync.application._internal.cli import (
    Operator,
    deployment_options,
    manifest_options,
    operation_options,
    run_operation,
)
from cloudcoil_sync.application._internal.conversion_config import stage_conversions
from cloudcoil_sync.application._internal.extras import CERT_MANAGER_API
from cloudcoil_sync.application._internal.manifests import (
    INSTALLED_BY,
    Definition,
    assemble,
    installed_by,
    mark,
)
from cloudcoil_sync.application._internal.options import ManifestOptions, OptionError
from cloudcoil_sync.application._internal.progress import (
    InstallConflict,
    InstallError,
    InstallTimeout,
    Operation,
    Steps,
    describe,
    field_manager,
)
from cloudcoil_sync.client import (
    AlreadyExists,
    ClientError,
    Config,
    Conflict,
    NotFound,
    UnknownKind,
)

__all__ = [
    "Applied",
    "changed_paths",
    "command",
    "install",
    "rollout_state",
]

JSON = dict[str, Any]
CRD_KIND = "CustomResourceDefinition"
_LEASES = ("coordination.k8s.io", "v1", "leases")
WEBHOOKS_NEED_IMAGE = (
    "Installing webhooks requires image=... to wait for a serving Deployment; "
    "use include_webhooks=False to install only CRDs and RBAC"
)
#: Metadata the server maintains; never a difference the user made.
_VOLATILE = {"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"}


@dataclass
class Applied:
    """One object's apply outcome: ``created``, ``configured`` or ``unchanged``."""

    object: str
    action: str
    fields: list[str] = field(default_factory=list)

    def dry_run_line(self) -> str:
        word = {"configured": "changed"}.get(self.action, self.action)
        return f"{word} {self.object}" + (f": {', '.join(self.fields)}" if self.fields else "")


def install(
    definition: Definition,
    options: ManifestOptions | None = None,
    *,
    force: bool = False,
    operation: Operation | None = None,
) -> list[Applied]:
    """Apply the manifests of ``definition`` deployed as ``options`` say (see the module
    docstring), as ``operation`` says; each object's outcome.

    Raises ``ValueError`` for bad options (`OptionError`) or definitions (before any request),
    :class:`InstallConflict`, :class:`InstallTimeout` or :class:`InstallError` otherwise.
    """
    operation = operation or Operation()
    operation.check("Installation")
    options = options or ManifestOptions()
    if options.include_webhooks and definition.webhook is not None and options.image is None:
        raise OptionError(WEBHOOKS_NEED_IMAGE, "image", "include_webhooks")
    documents = assemble(definition, options)
    crds = [d for d in documents if d["kind"] == CRD_KIND]
    ordered = crds + [d for d in documents if d["kind"] != CRD_KIND]
    lease = None
    if definition.lease is not None:
        lease = (definition.lease[0], definition.lease[1] or definition.namespace)
    with operation.connection(definition.namespace) as cfg:
        ordered = stage_conversions(ordered, cfg, definition.name)  # see conversion_config
        installer = _Installer(cfg, field_manager(definition.name), operation, force)
        installer.owner = installed_by(definition.name, definition.namespace)
        return installer.run(ordered, wait_rollout=options.image is not None, lease=lease)


class _Installer(Steps):
    def __init__(self, config: Config, manager: str, operation: Operation, force: bool) -> None:
        super().__init__(config, manager, operation)
        self.force = force
        self.owner = ""  # the INSTALLED_BY value of what this run creates

    def run(
        self, documents: list[JSON], *, wait_rollout: bool, lease: tuple[str, str] | None = None
    ) -> list[Applied]:
        self.begin(documents)
        results: list[Applied] = []
        for doc in documents:
            what = describe(doc)
            if self.deadline.expired:
                raise self.fail(self.timed_out(f"before applying {what}"), InstallTimeout)
            if lease is not None and doc["kind"] == "Deployment":
                # An existing Deployment may run a leader: leave a missing Lease to the
                # candidates, who then wait out a lease duration (it may hide a live leader).
                if self._absent(doc):
                    results.extend(self._released_lease(*lease))
                lease = None
            results.append(self._apply(doc))
            self.finished(what)
            if self.dry_run:
                continue
            if doc["kind"] == CRD_KIND:
                self._wait(doc, "established", crd_state)
            elif doc["kind"] == "Certificate" and doc["apiVersion"] == CERT_MANAGER_API:
                self._wait(doc, "issued", certificate_state)
            elif doc["kind"] == "Deployment" and wait_rollout:
                self._wait(doc, "available", rollout_state)
        if lease is not None:  # no Deployment here: the operator runs elsewhere
            results.extend(self._released_lease(*lease))
        crds = [d for d in documents if d["kind"] == CRD_KIND]
        if crds and not self.dry_run:
            self._rediscover(crds)
        self._summary(results)
        return results

    def _client(self, doc: JSON) -> Any:
        mapping = self.config.mapper.resolve(doc)
        return self.config.client((mapping.group, mapping.version, mapping.plural))

    def _apply(self, doc: JSON) -> Applied:
        what = describe(doc)
        try:
            client = self._client(doc)
            before = _get(client, doc)
            doc = self._marked(doc, before)
            after = client.apply(
                doc, field_manager=self.manager, force=self.force, dry_run=self.dry_run
            )
        except Conflict as exc:
            raise self._conflict(what, exc) from None
        except NotFound as exc:
            namespace = doc["metadata"].get("namespace")
            hint = f" (create namespace {namespace} first)" if exc.kind == "namespaces" else ""
            raise self.fail(f"applying {what} failed: {exc}{hint}") from None
        except (ClientError, UnknownKind) as exc:
            raise self.fail(f"applying {what} failed: {exc}") from None
        if before is None:
            result = Applied(what, "created")
        else:
            paths = changed_paths(before, after)
            same_version = _rv(before) == _rv(after) and not self.dry_run
            result = Applied(what, "unchanged" if same_version or not paths else "configured")
            result.fields = [] if result.action == "unchanged" else paths
        if not self.dry_run:
            fields = f" ({', '.join(result.fields)})" if result.fields else ""
            self.progress.line(f"applied {what}: {result.action}{fields}")
        return result

    def _marked(self, doc: JSON, before: JSON | None) -> JSON:
        """``doc`` with the INSTALLED_BY annotation only if this install creates the object or
        it carries one already (kept as it is: another namespace's install of the same CRD);
        an object found in place without it is adopted, never marked, so uninstall leaves it."""
        if before is None:
            return doc
        found = ((before.get("metadata") or {}).get("annotations") or {}).get(INSTALLED_BY)
        if found is None and INSTALLED_BY in (doc["metadata"].get("annotations") or {}):
            self.progress.line(
                f"found {describe(doc)} in place, not installed by {self.manager}: "
                "uninstall will leave it"
            )
        return mark(doc, found)

    def _absent(self, doc: JSON) -> bool:
        try:
            return _get(self._client(doc), doc) is None
        except (ClientError, UnknownKind) as exc:
            raise self.fail(f"reading {describe(doc)} failed: {exc}") from None

    def _released_lease(self, name: str, namespace: str) -> list[Applied]:
        """Create the leader-election Lease with no holder, if it does not exist; a dry run
        returns it as an outcome to list (it is not one of the applied manifests)."""
        what = f"Lease {namespace}/{name}"
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": "", "leaseTransitions": 0},
        }
        lease = mark(lease, self.owner or None)
        try:
            self.config.client(_LEASES).create(
                lease, namespace=namespace, field_manager=self.manager, dry_run=self.dry_run
            )
        except AlreadyExists:
            return []  # held or released by a candidate already: never touched
        except ClientError as exc:
            raise self.fail(f"creating {what} failed: {exc}") from None
        detail = "released, the first replica leads at once"
        if self.dry_run:  # listed with what would be applied
            return [Applied(what, "created", [detail])]
        self.progress.line(f"created {what}: {detail}")
        return []

    def _conflict(self, what: str, exc: Conflict) -> InstallError:
        causes = [c for c in exc.causes if c.get("reason") == "FieldManagerConflict"]
        if not causes:
            return self.fail(f"applying {what} failed: {exc}")
        message = str(causes[0].get("message", ""))
        manager = message.split('"')[1] if message.count('"') >= 2 else message
        return InstallConflict(
            what,
            manager,
            str(causes[0].get("field", "?")),
            len(causes) - 1,
            done=self.done,
            pending=self.pending,
            verb=self.verb,
        )

    def _wait(self, doc: JSON, label: str, check: Callable[[JSON, JSON], tuple[bool, str]]) -> None:
        what = describe(doc)
        client = self._client(doc)

        def poll() -> tuple[bool, str]:
            try:
                obj = _get(client, doc)
            except ClientError as exc:
                raise self.fail(f"reading {what} failed: {exc}") from None
            if obj is None:
                raise self.fail(f"{what} disappeared while waiting for it to be {label}")
            ready, state = check(doc, obj)
            if state.startswith("rejected"):
                raise self.fail(f"CRD name rejected: {doc['metadata']['name']} ({state})")
            return ready, state

        self.wait(what, label, poll)

    def _rediscover(self, crds: list[JSON]) -> None:
        """Wait until discovery serves every served version of each CRD: an API server
        (kube-apiserver, the emulator) publishes a version a little after the CRD changes."""
        for crd in crds:
            spec = crd["spec"]
            targets = [
                (spec["group"], version["name"], spec["names"]["plural"])
                for version in spec.get("versions") or []
                if version.get("served", True)
            ]

            def poll(targets: list[tuple[str, str, str]] = targets) -> tuple[bool, str]:
                for target in targets:
                    try:
                        self.config.mapper.resolve(target)
                    except (ClientError, UnknownKind) as exc:
                        return False, str(exc)
                return True, "served"

            self.wait(f"discovery of {describe(crd)}", "served", poll)
        self.progress.line("discovery refreshed")

    def _summary(self, results: list[Applied]) -> None:
        counts = {a: sum(r.action == a for r in results) for a in ("created", "configured")}
        unchanged = len(results) - sum(counts.values())
        parts = [f"{n} {a}" for a, n in counts.items() if n] + [f"{unchanged} unchanged"]
        seconds = self.progress.elapsed()
        if self.dry_run:
            changes = ", ".join(p.replace("configured", "changed") for p in parts)
            line = f"dry run: {len(results)} objects ({changes}); nothing was changed"
        elif unchanged == len(results):
            line = f"install: nothing to change, {len(results)} objects up to date"
        else:
            line = f"installed {len(results)} objects in {seconds:.1f} s ({', '.join(parts)})"
        self.progress.line(line)


def _get(client: Any, doc: JSON) -> JSON | None:
    meta = doc["metadata"]
    try:
        obj: JSON = client.get(meta["name"], namespace=meta.get("namespace"))
    except NotFound:
        return None
    return obj


def _rv(obj: JSON) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


def crd_state(doc: JSON, obj: JSON) -> tuple[bool, str]:
    """(established, state); a state starting with "rejected" means NamesAccepted=False."""
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    names = conditions.get("NamesAccepted") or {}
    if names.get("status") == "False":
        return False, f"rejected: {names.get('reason', '')} {names.get('message', '')}".strip()
    established = conditions.get("Established") or {}
    if established.get("status") == "True":
        return True, "Established"
    return False, f"Established={established.get('status', 'unknown')}"


def certificate_state(doc: JSON, obj: JSON) -> tuple[bool, str]:
    """(issued, state) of a cert-manager Certificate: its Ready condition."""
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    ready = conditions.get("Ready") or {}
    if ready.get("status") == "True":
        return True, "Ready"
    detail = f": {ready.get('reason', '')} {ready.get('message', '')}".rstrip() if ready else ""
    return False, f"Ready={ready.get('status', 'unknown')}{detail}"


def rollout_state(doc: JSON, obj: JSON) -> tuple[bool, str]:
    """(current revision available, state) for a Deployment, as the reference decides it."""
    want = int((doc.get("spec") or {}).get("replicas", 1))
    status = obj.get("status") or {}
    generation = int((obj.get("metadata") or {}).get("generation", 1))
    observed = int(status.get("observedGeneration", 0))
    updated = int(status.get("updatedReplicas", 0))
    available = int(status.get("availableReplicas", 0))
    old = int(status.get("replicas", 0)) - updated
    ready = observed >= generation and updated >= want and available >= want and old == 0
    if observed < generation:
        return ready, f"generation {generation} not yet observed"
    state = f"{updated}/{want} updated, {available}/{want} available"
    state += f", {old} old replicas" if old > 0 else ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Progressing" and condition.get("status") == "False":
            state += f", {condition.get('reason')}: {condition.get('message', '')}".rstrip(": ")
    return ready, state


def changed_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """Field paths (``.spec.replicas``, ``.spec.containers[name=x].image``) that differ,
    ignoring status and server-maintained metadata."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            if (path == "" and key == "status") or (path == ".metadata" and key in _VOLATILE):
                continue
            if before.get(key) != after.get(key):
                out += changed_paths(before.get(key), after.get(key), f"{path}.{key}")
        return out
    if isinstance(before, list) and isinstance(after, list) and before != after:
        keyed = _by_name(before), _by_name(after)
        if keyed[0] is not None and keyed[1] is not None and keyed[0].keys() == keyed[1].keys():
            out = []
            for name in keyed[0]:
                out += changed_paths(keyed[0][name], keyed[1][name], f"{path}[name={name}]")
            return out
    return [path] if before != after else []


def _by_name(items: list[Any]) -> dict[str, Any] | None:
    if not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    named = {i["name"]: i for i in items}
    return named if len(named) == len(items) else None


# -- command line -------------------------------------------------------------------------------


def command(app: Operator) -> click.Command:
    """``install``: the manifests' flags plus --timeout, --force, --dry-run, --quiet."""

    @click.command("install", help="Apply the manifests with server-side apply and wait for them.")
    @deployment_options
    @click.option("--force", is_flag=True, help="Take ownership of fields other managers own.")
    @operation_options("installation", "Server-side dry run: show what would change.")
    def install_command(force: bool, **params: Any) -> None:
        options = manifest_options(app.webhook, params)
        run_operation(install, app, params, options=options, force=force)

    return install_command
