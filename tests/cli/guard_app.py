"""An admission-only operator (needs a CA for its webhook registrations)."""

from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application, WebhookServer

app = Application("guard", namespace="guard", webhook=WebhookServer(tls_secret="guard-tls"))


@app.validate(ConfigMap)
def require_owner(request: Any) -> None:
    return None


if __name__ == "__main__":
    app.main()
