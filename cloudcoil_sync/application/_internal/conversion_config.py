"""The conversion part of a multi-version CRD's manifest, as an operator installs it.

With the operator's webhook: ``spec.conversion.webhook.clientConfig`` names the operator's
Service, the kind's conversion path and the CA bundle (or cert-manager's cainjector fills it
in, by the same annotation as on webhook configurations). Without it (``--without-webhooks``,
an operator run outside the cluster): only the storage version is served and
``conversion.strategy`` is ``None``, so the API server never needs to convert anything;
`install` refuses that while ``status.storedVersions`` still lists another version.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.application._internal.extras import INJECT_CA, certificate_name

if TYPE_CHECKING:
    from cloudcoil_sync.application._internal.settings import WebhookServer

__all__ = ["crd_conversions", "is_multi_version", "storage_only", "with_conversion_webhook"]

JSON = dict[str, Any]


def is_multi_version(document: JSON) -> bool:
    """A generated CRD that asks for the conversion webhook."""
    conversion = (document.get("spec") or {}).get("conversion") or {}
    return document.get("kind") == "CustomResourceDefinition" and (
        conversion.get("strategy") == "Webhook"
    )


def with_conversion_webhook(
    document: JSON,
    *,
    name: str,
    namespace: str,
    port: int,
    ca_bundle: bytes | None,
) -> JSON:
    """``document`` (a multi-version CRD) calling the operator's Service; ``ca_bundle`` None:
    cert-manager injects it. The input is not changed."""
    spec = dict(document["spec"])
    path = f"/convert/{document['metadata']['name']}"
    client: JSON = {"service": {"namespace": namespace, "name": name, "path": path, "port": port}}
    metadata = dict(document["metadata"])
    if ca_bundle is not None:
        client["caBundle"] = base64.b64encode(ca_bundle).decode()
    else:
        annotations = dict(metadata.get("annotations") or {})
        annotations[INJECT_CA] = f"{namespace}/{certificate_name(name)}"
        metadata["annotations"] = annotations
    webhook = {**spec["conversion"]["webhook"], "clientConfig": client}
    spec["conversion"] = {"strategy": "Webhook", "webhook": webhook}
    return {**document, "metadata": metadata, "spec": spec}


def storage_only(document: JSON) -> JSON:
    """``document`` (a multi-version CRD) serving only its storage version, unconverted."""
    spec = dict(document["spec"])
    versions = []
    for version in spec["versions"]:
        entry = {k: v for k, v in version.items() if k not in ("deprecated", "deprecationWarning")}
        entry["served"] = bool(version.get("storage"))
        versions.append(entry)
    spec["versions"] = versions
    spec["conversion"] = {"strategy": "None"}
    return {**document, "spec": spec}


def crd_conversions(
    documents: list[JSON],
    name: str,
    namespace: str,
    webhook: WebhookServer | None,
    ca_bundle: bytes | None,
) -> list[JSON]:
    """Every multi-version CRD of ``documents`` with its conversion as installed: the
    webhook of the operator's Service (``ca_bundle`` None: cert-manager injects it), or
    without a webhook `storage_only`."""
    out = []
    for document in documents:
        if is_multi_version(document):
            document = (
                storage_only(document)
                if webhook is None
                else with_conversion_webhook(
                    document,
                    name=name,
                    namespace=namespace,
                    port=webhook.service_port,
                    ca_bundle=ca_bundle,
                )
            )
        out.append(document)
    return out
