"""The Account custom resource of the change handler tests (example.com/v1): a spec with a
scalar, a list and a nested field, and a status model that is not a `ReconcileStatus`."""

from __future__ import annotations

from typing import Any, Literal

from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import ConfigDict, Field

from cloudcoil_sync.client import Config
from cloudcoil_sync.crd import CRD, custom_resource

__all__ = ["Account", "AccountSpec", "AccountStatus", "create_account", "install_accounts"]


class Quota(BaseModel):
    storage: int = 1


class AccountSpec(BaseModel):
    owner: str = "nobody"
    buckets: list[str] = Field(default_factory=list)
    quota: Quota = Field(default_factory=Quota)


class AccountStatus(BaseModel):
    model_config = ConfigDict(extra="allow")  # keeps `progress` (progress="status")
    phase: str | None = None


@custom_resource(api_version="example.com/v1", plural="accounts")
class Account(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["Account"] = "Account"
    spec: AccountSpec = Field(default_factory=AccountSpec)
    status: AccountStatus | None = None


def install_accounts(config: Config) -> None:
    config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions")).create(
        CRD(Account).manifest()
    )


def create_account(config: Config, name: str, **spec: Any) -> dict[str, Any]:
    return config.client(Account).raw.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Account",
            "metadata": {"name": name},
            "spec": {"owner": "ann", **spec},
        }
    )
