"""The conversion part of a multi-version CRD's manifest, as an operator installs it.

With the operator's webhook: ``spec.conversion.webhook.clientConfig`` names the operator's
Service, the kind's conversion path and the CA bundle (or cert-manager's cainjector fills it
in, by the same annotation as on webhook configurations). Without it (``--without-webhooks``,
an operator run outside the cluster): only the storage version is served and
``conversion.strategy`` is ``None``, so the API server never needs to convert anything;
`install` refuses that while ``status.storedVersions`` still lists another version.

`stage_conversions` is install's part: it refuses a CRD that drops (or, without the webhook,
no longer converts) a version still in ``status.storedVersions``, naming ``migrate``, and
orders a CRD converting by webhook so that it converts only once the webhook answers: a new
CRD is first applied serving its storage version only (nothing is stored yet, so nothing
needs converting), an existing one is left as it is, and the full CRD is applied after the
Deployment serving ``/convert/...`` is available, just before the admission registrations.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.application._internal.extras import INJECT_CA, certificate_name
from cloudcoil_sync.application._internal.progress import InstallError
from cloudcoil_sync.client import ClientError, NotFound

if TYPE_CHECKING:
    from cloudcoil_sync.application._internal.settings import WebhookServer
    from cloudcoil_sync.client import Config

__all__ = [
    "CRDS",
    "crd_conversions",
    "is_multi_version",
    "multi_version",
    "stage_conversions",
    "storage",
    "storage_only",
    "with_conversion_webhook",
]

JSON = dict[str, Any]
CRDS = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")


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


def storage(crd: JSON) -> str:
    return next((v["name"] for v in crd["spec"]["versions"] if v.get("storage")), "")


def multi_version(document: JSON) -> bool:
    return document.get("kind") == "CustomResourceDefinition" and (
        len((document.get("spec") or {}).get("versions") or []) > 1
    )


def stage_conversions(documents: list[JSON], config: Config, app: str) -> list[JSON]:
    """``documents`` (install order) with every CRD checked against the cluster's
    ``storedVersions`` and each converting by webhook staged around the rollout: applied
    serving its storage version only if new (left as it is if not), then in full just
    before the admission registrations, once the Deployment serving it is available."""
    crds = config.client(CRDS)
    staged: list[JSON] = []
    later: list[JSON] = []
    for document in documents:
        if document.get("kind") != "CustomResourceDefinition":
            staged.append(document)
            continue
        name = document["metadata"]["name"]
        try:
            current = crds.get(name)
        except NotFound:
            current = None
        except ClientError as exc:
            if not multi_version(document):  # the apply that follows reports it
                staged.append(document)
                continue
            raise InstallError(f"reading CustomResourceDefinition {name} failed: {exc}") from None
        _check_stored(document, current, app)
        if (document["spec"].get("conversion") or {}).get("strategy") != "Webhook":
            staged.append(document)
            continue
        if current is None:
            staged.append(storage_only(document))
        later.append(document)
    at = next(
        (i for i, d in enumerate(staged) if d["kind"].endswith("WebhookConfiguration")),
        len(staged),
    )
    return staged[:at] + later + staged[at:]


def _check_stored(document: JSON, current: JSON | None, app: str) -> None:
    stored = ((current or {}).get("status") or {}).get("storedVersions") or []
    versions = document["spec"]["versions"]
    readable = {v["name"] for v in versions}
    if (document["spec"].get("conversion") or {}).get("strategy") != "Webhook":
        readable = {storage(document)}  # --without-webhooks: nothing converts
    left = [version for version in stored if version not in readable]
    if left:
        name = document["metadata"]["name"]
        raise InstallError(
            f"{name}: objects may still be stored as {', '.join(left)}, which this install "
            f"would {'drop' if set(left) - {v['name'] for v in versions} else 'no longer convert'}"
            f" (status.storedVersions = {stored}); run the {app} operator's migrate command "
            "(python app.py migrate) first"
        )
