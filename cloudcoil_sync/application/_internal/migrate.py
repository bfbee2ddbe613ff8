"""Storage migration of multi-version custom resources, and how ``install`` stages them.

``python app.py migrate``: for each CRD of the operator whose ``status.storedVersions`` on the
cluster lists more than its storage version, every object is read in the
storage version and written back unchanged (kube-apiserver rewrites an unchanged object stored
in an older version: what kube-storage-version-migrator does), then ``storedVersions`` is
trimmed to the storage version. Safe to rerun (a finished CRD is skipped; an object changed
or deleted meanwhile was rewritten or needs nothing), progress on stderr.

``install`` refuses to drop a version still in ``storedVersions`` and names this command
(`conversion_config.stage_conversions`, which also orders the CRD after the rollout).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import click

from cloudcoil_sync.application._internal.cli import Operator, operation_options, run_operation
from cloudcoil_sync.application._internal.conversion_config import CRDS, storage
from cloudcoil_sync.application._internal.progress import InstallError, Operation, Progress
from cloudcoil_sync.client import ClientError, Conflict, NotFound

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["command", "migrate"]

JSON = dict[str, Any]
_EVERY = 100  # a progress line every this many objects


def migrate(config: Config, crds: list[JSON], progress: Progress) -> int:
    """Rewrite every object of each CRD in ``crds`` (manifests; the cluster's CRD is the one
    read) to its storage version and trim ``storedVersions``; the objects rewritten."""
    total = 0
    for manifest in crds:
        name = manifest["metadata"]["name"]
        client = config.client(CRDS)
        try:
            crd = client.get(name)
        except NotFound:
            progress.line(f"{name}: not installed; nothing to migrate")
            continue
        version = storage(crd)
        stored = (crd.get("status") or {}).get("storedVersions") or []
        if stored == [version]:
            progress.line(f"{name}: every object is stored as {version}; nothing to migrate")
            continue
        total += _rewrite(config, crd, version, progress)
        _trim(client, name, version)
        progress.line(f"{name}: status.storedVersions = [{version}] (was {stored})")
    return total


def _rewrite(config: Config, crd: JSON, storage: str, progress: Progress) -> int:
    spec = crd["spec"]
    name = crd["metadata"]["name"]
    objects = config.client((spec["group"], storage, spec["names"]["plural"]))
    count = 0
    for page in objects.pages(all_namespaces=True, limit=250):
        for obj in page.items:
            # Unchanged: the API server writes it again in the storage version. Changed or
            # deleted meanwhile (409, 404): written in the storage version already.
            with contextlib.suppress(Conflict, NotFound):
                objects.replace(obj, namespace=obj["metadata"].get("namespace"))
            count += 1
            if count % _EVERY == 0:
                progress.line(f"{name}: {count} objects rewritten as {storage}")
    progress.line(f"{name}: {count} objects rewritten as {storage}")
    return count


def _trim(client: Any, name: str, storage: str) -> None:
    for _ in range(5):
        crd = client.get(name)
        crd["status"]["storedVersions"] = [storage]
        try:
            client.replace_status(crd)
            return
        except Conflict:
            continue
    raise InstallError(f"{name}: status.storedVersions kept changing; run migrate again")


def command(app: Operator) -> click.Command:
    """``migrate``: rewrite stored objects to the storage version, trim storedVersions."""

    @click.command(
        "migrate",
        help="Rewrite every stored custom resource in its CRD's storage version, then trim "
        "status.storedVersions (safe to rerun).",
    )
    @operation_options("migration", "Only show what would be migrated.")
    def migrate_command(**params: Any) -> None:
        run_operation(_migrate, app, params)

    return migrate_command


def _migrate(definition: Any, *, operation: Operation) -> list[Any]:
    """The ``migrate`` command's operation: the dry run's lines, or nothing once done."""
    progress = operation.reporter()
    crds = [m for _, m in definition.crds]
    if not crds:
        progress.line("this operator defines no CRD")
        return []
    with operation.connection(definition.namespace) as config:
        if operation.dry_run:
            return [_Planned(config, m) for m in crds]
        try:
            migrate(config, crds, progress)
        except ClientError as exc:
            raise InstallError(f"migration failed: {exc}") from None
    return []


class _Planned:
    """A dry run's line: what the CRD stores and would be trimmed to."""

    def __init__(self, config: Config, manifest: JSON) -> None:
        name = manifest["metadata"]["name"]
        try:
            crd = config.client(CRDS).get(name)
        except NotFound:
            self.line = f"{name}: not installed"
            return
        self.line = (
            f"{crd['metadata']['name']}: storedVersions "
            f"{(crd.get('status') or {}).get('storedVersions')} -> [{storage(crd)}]"
        )

    def dry_run_line(self) -> str:
        return self.line
