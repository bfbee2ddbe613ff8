"""The seed's ConfigMap example converges 1,000 labelled ConfigMaps, one write each."""

from __future__ import annotations

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.controller import Controller
from cloudcoil_sync.testing import Emulator

from .conftest import Harness

COUNT = 1000


def test_seed_example_converges_a_thousand_configmaps(
    kube_emulator: Emulator, harness: Harness
) -> None:
    for i in range(COUNT):
        labels = {"example.com/manage": "true"} if i % 10 else {}
        kube_emulator.create_object(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i}", "namespace": "default", "labels": labels},
                "data": {"i": str(i)},
            }
        )
    configs: Controller[ConfigMap] = Controller(
        ConfigMap, label_selector="example.com/manage=true", workers=4
    )

    @configs.reconcile()
    def reconcile(config: ConfigMap) -> ConfigMap:
        config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
        return config

    runtime = harness.run(configs, name="seed")

    def converged() -> int:
        return sum(
            1
            for o in kube_emulator.list_objects("", "configmaps", "default")
            if (o.get("data") or {}).get("managed-by") == "cloudcoil"
        )

    managed = COUNT - COUNT // 10
    assert kube_emulator.wait_for(lambda: converged() == managed, timeout=120)
    assert runtime.queue.join(30)
    counts, _, writes = runtime.reconciler.stats()
    assert writes == managed  # the echo of each write is a no-op pass
    assert counts["error"] == 0
    unlabelled = kube_emulator.get_object("", "configmaps", "default", "cm-0")
    assert unlabelled is not None and unlabelled["data"] == {"i": "0"}
