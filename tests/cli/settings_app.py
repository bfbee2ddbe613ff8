"""The seed's controller-only example, runnable as a script (`python settings_app.py manifests`)."""

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application

app = Application("settings", leader_election=True)
configs = app.controller(ConfigMap, label_selector="example.com/manage=true")


@configs.reconcile()
def reconcile(config: ConfigMap) -> ConfigMap:
    config.data = {**(config.data or {}), "managed-by": "cloudcoil"}
    return config


if __name__ == "__main__":
    app.main()
