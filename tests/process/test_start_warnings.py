"""What `run` says at start about objects its controllers will never see."""

from __future__ import annotations

import logging
import threading
from typing import Literal

import pytest
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application
from cloudcoil_sync.application._internal.scope import warn_outside_scope
from cloudcoil_sync.client import Config
from cloudcoil_sync.crd import CRD, custom_resource
from cloudcoil_sync.testing import Emulator


class PolicySpec(BaseModel):
    schedule: str = "@daily"


@custom_resource(api_version="example.com/v1", plural="backuppolicies")
class BackupPolicy(Resource):
    api_version: Literal["example.com/v1"] = Field(default="example.com/v1", alias="apiVersion")
    kind: Literal["BackupPolicy"] = "BackupPolicy"
    spec: PolicySpec = Field(default_factory=PolicySpec)


def policies_in(config: Config, *namespaces: str) -> None:
    crds = config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
    crds.create(CRD(BackupPolicy).manifest())
    for namespace in namespaces:
        if namespace != "default":
            config.client(("", "v1", "namespaces")).create({"metadata": {"name": namespace}})
        config.client(BackupPolicy).raw.create(
            {"apiVersion": "example.com/v1", "kind": "BackupPolicy",
             "metadata": {"name": "nightly", "namespace": namespace}},
            namespace=namespace,
        )  # fmt: skip


def test_run_warns_when_objects_of_its_crd_are_outside_the_watched_namespace(
    kube_emulator: Emulator, kube_config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    policies_in(kube_config, "default", "team-a", "team-b")
    app = Application("backup", config=kube_config)
    app.controller(BackupPolicy).reconcile()(lambda policy: None)
    stop = threading.Event()
    thread = threading.Thread(target=app.run, kwargs={"stop": stop})
    with caplog.at_level(logging.INFO, logger="cloudcoil_sync.application"):
        thread.start()
        try:
            app.wait_ready(15)
        finally:
            stop.set()
            thread.join(30)
    (line,) = [r for r in caplog.records if "objects exist in" in r.getMessage()]
    assert line.levelno == logging.WARNING
    text = line.getMessage()
    assert "watches BackupPolicy in namespace 'default' only" in text
    assert "team-a, team-b" in text and "all_namespaces=True" in text


def test_no_warning_when_everything_is_in_scope_or_the_list_is_denied(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    policies_in(kube_config, "default")
    app = Application("backup", config=kube_config)
    everywhere = app.controller(BackupPolicy, label_selector="a=b")
    assert warn_outside_scope([everywhere], kube_config, "default") == []
    policies_in_other = kube_config.client(("", "v1", "namespaces"))
    policies_in_other.create({"metadata": {"name": "elsewhere"}})
    kube_config.client(BackupPolicy).raw.create(
        {"apiVersion": "example.com/v1", "kind": "BackupPolicy",
         "metadata": {"name": "x", "namespace": "elsewhere"}},
        namespace="elsewhere",
    )  # fmt: skip
    kube_emulator.faults.inject(503, count=1, method="GET", path="/backuppolicies$")
    assert warn_outside_scope([everywhere], kube_config, "default") == []  # failed: silent
    assert len(warn_outside_scope([everywhere], kube_config, "default")) == 1
