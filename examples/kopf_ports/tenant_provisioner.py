"""A typical multi-stage kopf operator: independent handlers with their own retries,
sub-handlers per list item, a cleanup held by a finalizer, and a resume check.

The kopf original:

    @kopf.on.create('tenants', id='quota', retries=3, backoff=5)
    def quota(spec, name, **_):
        QUOTAS.reserve(name, spec['storageGb'])

    @kopf.on.create('tenants', id='databases', backoff=5)
    def databases(spec, name, **_):
        for db in spec.get('databases', []):
            @kopf.subhandler(id=f'db-{db}')
            def create_db(db=db, retry, **_):
                if not DATABASES.create(f'{name}-{db}'):
                    raise kopf.TemporaryError('database server busy', delay=1)

    @kopf.on.resume('tenants')
    def check(spec, name, **_):
        for db in spec.get('databases', []):
            DATABASES.create(f'{name}-{db}')   # idempotent: re-create what vanished

    @kopf.on.delete('tenants')
    def cleanup(spec, name, **_):
        for db in spec.get('databases', []):
            DATABASES.drop(f'{name}-{db}')
        QUOTAS.release(name)

Handler for handler, the same here: `retries=`/`backoff=`, `TemporaryError(delay=)`,
`ctx.substeps({...})` for the sub-handlers, each item retried on its own; the progress
kopf keeps in `kopf.zalando.org/*` annotations is in `handlers.cloudcoil.dev/progress`. Two
stand-ins play the external systems (`QUOTAS`, `DATABASES`); `DATABASES` refuses each
database once ("busy"), so every item is retried once.

    python examples/kopf_ports/tenant_provisioner.py manifests
"""

from __future__ import annotations

import functools
import threading
from typing import Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, TemporaryError
from cloudcoil_sync.crd import custom_resource

__all__ = ["DATABASES", "QUOTAS", "Tenant", "app", "tenants"]


class Databases:
    """Stand-in for a database server that is busy the first time each name is asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.live: set[str] = set()
        self.asked: dict[str, int] = {}

    def create(self, name: str) -> bool:
        with self._lock:
            self.asked[name] = self.asked.get(name, 0) + 1
            if self.asked[name] == 1:
                return False  # busy
            self.live.add(name)
            return True

    def drop(self, name: str) -> None:
        with self._lock:
            self.live.discard(name)


class Quotas:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reserved: dict[str, int] = {}

    def reserve(self, name: str, gigabytes: int) -> None:
        with self._lock:
            self.reserved[name] = gigabytes

    def release(self, name: str) -> None:
        with self._lock:
            self.reserved.pop(name, None)


DATABASES, QUOTAS = Databases(), Quotas()


class TenantSpec(BaseModel):
    storage_gb: int = Field(default=10, alias="storageGb")
    databases: list[str] = Field(default_factory=list)


@custom_resource(api_version="kopf.dev/v1", plural="tenants")
class Tenant(Resource):
    api_version: Literal["kopf.dev/v1"] = Field(default="kopf.dev/v1", alias="apiVersion")
    kind: Literal["Tenant"] = "Tenant"
    spec: TenantSpec = Field(default_factory=TenantSpec)


app = Application("tenants")
tenants = app.controller(Tenant)


@tenants.on_create(id="quota", retries=3, backoff=5)
def quota(tenant: Tenant) -> None:
    QUOTAS.reserve(tenant.name or "", tenant.spec.storage_gb)


@tenants.on_create(id="databases", backoff=5)
def databases(tenant: Tenant, ctx: Context[Tenant]) -> None:
    def create_db(db: str) -> None:
        if not DATABASES.create(f"{tenant.name}-{db}"):
            raise TemporaryError("database server busy", delay=0.2)

    ctx.substeps({f"db-{db}": functools.partial(create_db, db) for db in tenant.spec.databases})


@tenants.on_resume()
def check(tenant: Tenant) -> None:
    for db in tenant.spec.databases:
        DATABASES.create(f"{tenant.name}-{db}")


@tenants.on_delete()
def cleanup(tenant: Tenant) -> None:
    for db in tenant.spec.databases:
        DATABASES.drop(f"{tenant.name}-{db}")
    QUOTAS.release(tenant.name or "")


if __name__ == "__main__":
    app.main()
