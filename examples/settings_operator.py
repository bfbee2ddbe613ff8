"""The controller-only example of the SPEC: label a ConfigMap, and the operator manages it.

ConfigMaps labelled ``example.com/manage=true`` get ``data["managed-by"] = "cloudcoil"``; the
returned object is persisted as one guarded patch. No CRD, no webhook, one Lease::

    python examples/settings_operator.py manifests --image example/widgets:v1 > operator.yaml
    python examples/settings_operator.py install --without-webhooks
    python examples/settings_operator.py run
"""

from cloudcoil_sync.application import Application

# isort: split
# After cloudcoil_sync: cloudcoil's models then build on first use (a faster start-up).
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

app = Application("settings", leader_election=True)
configs = app.controller(ConfigMap, label_selector="example.com/manage=true")


@configs.reconcile()
def reconcile(config: ConfigMap) -> ConfigMap:
    config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
    return config


if __name__ == "__main__":
    app.main()
