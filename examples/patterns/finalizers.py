"""Finalizers with an external system: clean up outside Kubernetes before deletion completes.

A ``DnsRecord`` is published to a DNS provider (here a small thread-safe stand-in, ``PROVIDER``;
in real life an HTTP API called with ``requests``, which may block: handlers are plain
functions on worker threads). ``@records.finalize("example.com/dns-record")`` makes the
framework add the finalizer before the first reconcile, and on deletion run the handler, then
remove the finalizer; Kubernetes deletes the object only then. A failing cleanup is retried
with backoff and the object stays. ``reconcile(every=60)`` repairs drift in the provider
(someone deleted the record there) once a minute even without Kubernetes events.

    python examples/patterns/finalizers.py manifests
"""

from __future__ import annotations

import threading
from typing import Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, ReconcileStatus
from cloudcoil_sync.crd import custom_resource

__all__ = ["FINALIZER", "PROVIDER", "DnsProvider", "DnsRecord", "app", "records"]

FINALIZER = "example.com/dns-record"


class DnsProvider:
    """Stand-in for an external API: records by fully qualified name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: dict[str, str] = {}

    def upsert(self, fqdn: str, address: str) -> None:
        with self._lock:
            self.records[fqdn] = address

    def delete(self, fqdn: str) -> None:
        with self._lock:
            self.records.pop(fqdn, None)

    def lookup(self, fqdn: str) -> str | None:
        with self._lock:
            return self.records.get(fqdn)


PROVIDER = DnsProvider()


class RecordSpec(BaseModel):
    host: str
    address: str


class RecordStatus(ReconcileStatus):
    fqdn: str | None = None


@custom_resource(api_version="patterns.cloudcoil.dev/v1", plural="dnsrecords")
class DnsRecord(Resource):
    api_version: Literal["patterns.cloudcoil.dev/v1"] = Field(
        default="patterns.cloudcoil.dev/v1", alias="apiVersion"
    )
    kind: Literal["DnsRecord"] = "DnsRecord"
    spec: RecordSpec
    status: RecordStatus | None = None


app = Application("dns")
records = app.controller(DnsRecord)


def fqdn(record: DnsRecord) -> str:
    return f"{record.spec.host}.{record.namespace}.example.com"


@records.reconcile(every=60)
def publish(record: DnsRecord, ctx: Context[DnsRecord]) -> None:
    if PROVIDER.lookup(fqdn(record)) != record.spec.address:
        PROVIDER.upsert(fqdn(record), record.spec.address)
        ctx.event("Published", f"{fqdn(record)} -> {record.spec.address}")
    ctx.set_status(fqdn=fqdn(record))


@records.finalize(FINALIZER)
def unpublish(record: DnsRecord) -> None:
    PROVIDER.delete(fqdn(record))


if __name__ == "__main__":
    app.main()
