"""ObjectMeta rules beyond the recorded differential cases (tests/recordings/fidelity): what
carries a random or Go-only value there, updates, and custom resources' finalizer warning."""

from __future__ import annotations

from cloudcoil_sync.testing._internal.go_base64 import error_offset

from .conftest import Client, configmap
from .test_gc import CRDS, WIDGETS, crd

CM = "/api/v1/namespaces/default/configmaps"
SUBDOMAIN_END = "(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"


def test_a_bad_generate_name_is_named_before_the_name_made_from_it(client: Client) -> None:
    answer = client.post(
        CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "Bad_"}}
    )
    assert answer.status_code == 422
    causes = answer.json()["details"]["causes"]
    assert [c["field"] for c in causes] == ["metadata.generateName", "metadata.name"]
    assert causes[0]["message"].startswith('Invalid value: "Bad_": a lowercase RFC 1123 subdomain')
    assert causes[1]["message"].endswith(SUBDOMAIN_END)
    assert answer.json()["message"].count("metadata.") == 2  # bracketed, both listed
    dash = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "ok-"}}
    assert client.post(CM, dash).status_code == 201  # the trailing '-' is masked as Go does


def test_two_controller_owners_are_refused(client: Client) -> None:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "uid": "1", "controller": True}
    body = configmap("owned")
    body["metadata"]["ownerReferences"] = [
        {**owner, "name": "x"},
        {**owner, "name": "y", "uid": "2"},
    ]
    answer = client.post(CM, body)
    assert answer.status_code == 422
    (cause,) = answer.json()["details"]["causes"]
    assert cause["field"] == "metadata.ownerReferences"
    assert cause["message"].startswith("Invalid value: []v1.OwnerReference{v1.OwnerReference{")
    assert cause["message"].endswith(
        'Only one reference can have Controller set to true. Found "true" in references for '
        "ConfigMap/x and ConfigMap/y"
    )


def test_an_update_is_held_to_the_same_rules(client: Client) -> None:
    created = client.post(CM, configmap("kept", k="v")).json()
    created["metadata"]["labels"] = {"hash": "f" * 64}  # a digest as a label value: too long
    answer = client.put(CM + "/kept", created)
    assert answer.status_code == 422
    assert answer.json()["message"].endswith(": must be no more than 63 characters")
    patched = client.request(
        "PATCH",
        CM + "/kept",
        json={"metadata": {"finalizers": ["cleanup"]}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 422
    assert "name is neither a standard finalizer name nor is it fully qualified" in patched.text
    assert client.get(CM + "/kept").json()["metadata"].get("finalizers") is None


def test_a_custom_resource_gets_a_warning_for_an_unqualified_finalizer(client: Client) -> None:
    assert client.post(CRDS, crd()).status_code == 201
    assert client.emulator.wait_for(lambda: client.get(WIDGETS).status_code == 200)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    widget["metadata"]["finalizers"] = ["cleanup", "orphan", "example.com/ok"]
    created = client.post(WIDGETS, widget)
    assert created.status_code == 201
    assert created.headers["Warning"] == (
        '299 - "metadata.finalizers: \\"cleanup\\": prefer a domain-qualified finalizer name to '
        'avoid accidental conflicts with other finalizer writers"'
    )
    again = client.put(WIDGETS + "/w", created.json())  # already there: no warning again
    assert again.status_code == 200 and "Warning" not in again.headers
    bad = {**widget, "metadata": {"name": "w2", "labels": {"a/b/c": "x"}}}
    assert client.post(WIDGETS, bad).status_code == 422


SECRETS = "/api/v1/namespaces/default/secrets"


def test_secret_string_data_is_merged_into_data_on_every_write(client: Client) -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}}
    created = client.post(SECRETS, {**body, "stringData": {"password": "hunter2"}}).json()
    assert created["data"] == {"password": "aHVudGVyMg=="} and created["type"] == "Opaque"
    assert "stringData" not in created
    stored = client.get(SECRETS + "/creds").json()
    assert stored["data"] == {"password": "aHVudGVyMg=="} and "stringData" not in stored
    patched = client.request(
        "PATCH",
        SECRETS + "/creds",
        json={"stringData": {"user": "root", "password": "new"}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).json()
    assert patched["data"] == {"password": "bmV3", "user": "cm9vdA=="}
    assert "stringData" not in patched
    managed = patched["metadata"]["managedFields"]
    assert all("f:stringData" not in entry["fieldsV1"] for entry in managed)


def test_a_tls_secret_needs_its_keys_and_is_warned_without_pem(client: Client) -> None:
    tls = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls"}
    missing = client.post(SECRETS, {**tls, "metadata": {"name": "t1"}, "data": {}})
    assert missing.status_code == 422
    fields = [c["field"] for c in missing.json()["details"]["causes"]]
    assert fields == ["data[tls.crt]", "data[tls.key]"]
    junk = {"tls.crt": "x", "tls.key": "y"}
    warned = client.post(SECRETS, {**tls, "metadata": {"name": "t2"}, "stringData": junk})
    assert warned.status_code == 201
    assert warned.headers["Warning"] == (
        '299 - "tls: failed to find any PEM data in certificate input"'
    )


DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def test_a_deployment_update_that_unmatches_its_selector_is_refused(client: Client) -> None:
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }
    created = client.post(DEPLOYMENTS, deployment)
    assert created.status_code == 201, created.text
    refused = client.request(  # a patch: the emulator's controllers may have moved status
        "PATCH",
        DEPLOYMENTS + "/web",
        json={"spec": {"template": {"metadata": {"labels": {"app": "api"}}}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert refused.status_code == 422
    assert refused.json()["message"] == (
        'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"api"}: `selector` does not match template `labels`'
    )


def test_bytes_fields_are_decoded_as_go_decodes_them(client: Client) -> None:
    """Go's offsets (kube-apiserver 1.32 answered byte 4 for "hunter2", 0 for "YQ", 3 for
    "not base64!"; recorded for Secrets in tests/recordings/fidelity)."""
    cases = {"hunter2": 4, "YQ": 0, "not base64!": 3, "YQ=": 3, "Y===": 1, "YQ==x": 4, "a": 0}
    assert {text: error_offset(text) for text in cases} == cases
    assert [error_offset(t) for t in ("", "YQ==", "YWRt\naW4=", "YW\r\nRt")] == [None] * 4
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bin"}}
    refused = client.post(CM, {**body, "binaryData": {"a": "not base64!"}})
    assert refused.status_code == 400
    assert refused.json()["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
        "illegal base64 data at input byte 3"
    )
    stored = client.post(CM, {**body, "binaryData": {"a": "YWRt\naW4="}}).json()
    assert stored["binaryData"] == {"a": "YWRtaW4="}
