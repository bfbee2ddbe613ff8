"""Config: explicit TLS/auth, kubeconfig merging, exec plugins, in-cluster, bad inputs."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests.adapters
import yaml
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config, ConfigError, TransportError

from .certs import PKI
from .fakeserver import FakeAPI, Reply, Request

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}


def _ok(req: Request) -> Reply:
    return Reply(body=CM)


@pytest.fixture
def api(pki: PKI) -> Iterator[FakeAPI]:
    with FakeAPI(_ok, pki, client_ca=True) as server:
        yield server


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _write(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str | bytes) else str(data))
    return path


def _kubeconfig(
    server: str, *, ctx: str = "main", user: dict[str, Any] | None = None, **cluster: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": ctx,
        "clusters": [{"name": f"{ctx}-cluster", "cluster": {"server": server, **cluster}}],
        "users": [{"name": f"{ctx}-user", "user": user or {"token": f"{ctx}-token"}}],
        "contexts": [
            {
                "name": ctx,
                "context": {"cluster": f"{ctx}-cluster", "user": f"{ctx}-user", "namespace": ctx},
            }
        ],
    }


# -- explicit TLS and auth -----------------------------------------------------------------


def test_ca_data_wins_over_requests_ca_bundle(
    api: FakeAPI, pki: PKI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _write(tmp_path / "other.pem", pki.other_ca.cert_pem.decode())
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(other))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(other))
    with Config(api.url, token="t", ca_data=pki.ca.cert_pem) as cfg:
        assert cfg.client(ConfigMap).get("a").metadata is not None
    assert api.requests[0].headers["Authorization"] == "Bearer t"


def test_wrong_ca_is_a_clear_tls_error(api: FakeAPI, pki: PKI) -> None:
    with (
        Config(api.url, token="t", ca_data=pki.other_ca.cert_pem, max_retries=0) as cfg,
        pytest.raises(TransportError, match=r"TLS error talking to https://127\.0\.0\.1"),
    ):
        cfg.client(ConfigMap).get("a")


def test_insecure_skip_tls_verify(api: FakeAPI) -> None:
    with (
        Config(api.url, token="t", insecure_skip_tls_verify=True) as cfg,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        assert cfg.client(ConfigMap).get("a").metadata is not None


def test_client_certificate_data_and_files(api: FakeAPI, pki: PKI, tmp_path: Path) -> None:
    cfg = Config(
        api.url,
        ca_data=pki.ca.cert_pem,
        client_cert_data=pki.client.cert_pem,
        client_key_data=pki.client.key_pem,
    )
    cfg.client(ConfigMap).get("a")
    private = cfg._files.directory
    assert private is not None and stat.S_IMODE(os.stat(private).st_mode) == 0o700
    for name in os.listdir(private):
        assert stat.S_IMODE(os.stat(os.path.join(private, name)).st_mode) == 0o600
    cfg.close()
    assert not os.path.exists(private), "temporary credential files must be removed on close"
    subject = dict(x[0] for x in api.requests[-1].client_cert["subject"])  # type: ignore[index]
    assert subject["commonName"] == "test-user"

    crt = _write(tmp_path / "c.crt", pki.client.cert_pem.decode())
    key = _write(tmp_path / "c.key", pki.client.key_pem.decode())
    ca = _write(tmp_path / "ca.crt", pki.ca.cert_pem.decode())
    with Config(api.url, ca_file=ca, client_cert_file=crt, client_key_file=key) as cfg2:
        cfg2.client(ConfigMap).get("a")
        assert cfg2._files.directory is None  # nothing needed writing
    assert api.requests[-1].client_cert is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"server": "not a url"}, "not an http"),
        ({"server": "ftp://x"}, "not an http"),
        ({"ca_data": b"garbage"}, "not a valid PEM certificate"),
        ({"ca_file": "/nonexistent/ca.crt"}, "cannot read CA file"),
        ({"client_cert_data": b"x"}, "key missing"),
        ({"client_cert_data": b"x", "client_key_data": b"y"}, "client certificate/key"),
        ({"token_file": "/nonexistent/token"}, "cannot read token file"),
    ],
)
def test_bad_explicit_inputs(kwargs: dict[str, Any], message: str) -> None:
    args = {"server": "https://127.0.0.1:6443", **kwargs}
    with pytest.raises(ConfigError, match=message):
        Config(**args)


def test_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    with Config("https://k.example:6443", proxy_url="http://proxy:3128") as cfg:
        assert cfg.session.proxies == {"http": "http://proxy:3128", "https": "http://proxy:3128"}
        assert cfg.session.trust_env is False
    monkeypatch.setenv("HTTPS_PROXY", "http://envproxy:8080")
    with Config("https://k.example:6443") as cfg:
        assert cfg.session.proxies.get("https") == "http://envproxy:8080"
    monkeypatch.setenv("NO_PROXY", "k.example")
    with Config("https://k.example:6443") as cfg:
        assert "https" not in cfg.session.proxies


def test_pool_is_sized_for_informers_and_workers() -> None:
    with Config("https://k:1") as cfg:
        adapter = cfg.session.get_adapter("https://k:1")
        assert isinstance(adapter, requests.adapters.HTTPAdapter)
        assert adapter.poolmanager.connection_pool_kw["maxsize"] >= 64
        assert cfg.client(ConfigMap) is not cfg.client(ConfigMap)
        assert cfg.client(ConfigMap).config.transport is cfg.transport


# -- kubeconfig ----------------------------------------------------------------------------


def test_kubeconfig_data_forms(api: FakeAPI, pki: PKI, tmp_path: Path) -> None:
    kc = _kubeconfig(
        api.url,
        user={
            "client-certificate-data": _b64(pki.client.cert_pem),
            "client-key-data": _b64(pki.client.key_pem),
        },
        **{"certificate-authority-data": _b64(pki.ca.cert_pem)},
    )
    path = _write(tmp_path / "config", kc)
    with Config.from_kubeconfig(path) as cfg:
        assert cfg.namespace == "main"
        assert cfg.client(ConfigMap).get("a").metadata is not None
    assert api.requests[-1].client_cert is not None


def test_kubeconfig_relative_file_forms(api: FakeAPI, pki: PKI, tmp_path: Path) -> None:
    sub = tmp_path / "kube"
    sub.mkdir()
    _write(sub / "ca.crt", pki.ca.cert_pem.decode())
    _write(sub / "tok", "from-file\n")
    kc = _kubeconfig(api.url, user={"tokenFile": "tok"}, **{"certificate-authority": "ca.crt"})
    path = _write(sub / "config", kc)
    with Config.from_kubeconfig(str(path)) as cfg:
        cfg.client(ConfigMap).get("a")
    assert api.requests[-1].headers["Authorization"] == "Bearer from-file"


def test_kubeconfig_insecure_and_proxy(tmp_path: Path) -> None:
    extra: dict[str, Any] = {"insecure-skip-tls-verify": True, "proxy-url": "http://p:1"}
    kc = _kubeconfig("https://k:6443", **extra)
    with Config.from_kubeconfig(_write(tmp_path / "c", kc)) as cfg:
        assert cfg.session.verify is False
        assert cfg.session.proxies["https"] == "http://p:1"


def test_kubeconfig_list_merge_first_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _kubeconfig("https://first:1", ctx="shared")
    first.pop("current-context")
    second = _kubeconfig("https://second:1", ctx="shared")
    second["current-context"] = "shared"
    extra = _kubeconfig("https://extra:1", ctx="extra")
    second["contexts"] += extra["contexts"]
    second["clusters"] += extra["clusters"]
    second["users"] += extra["users"]
    a, b = _write(tmp_path / "a", first), _write(tmp_path / "b", second)
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(a), str(b)]))
    with Config.from_kubeconfig() as cfg:  # current-context from b, cluster from a
        assert cfg.server == "https://first:1"
    with Config.load(context="extra") as cfg:
        assert (cfg.server, cfg.namespace) == ("https://extra:1", "extra")


def test_home_kubeconfig_and_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="no Kubernetes configuration found"):
        Config.load()
    (tmp_path / ".kube").mkdir()
    _write(tmp_path / ".kube" / "config", _kubeconfig("https://home:6443"))
    with Config.load() as cfg:
        assert cfg.server == "https://home:6443"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda kc: kc.update({"current-context": "nope"}), "context 'nope' not found.*main"),
        (lambda kc: kc.pop("current-context"), "no current-context"),
        (lambda kc: kc["contexts"][0]["context"].update(cluster="x"), "unknown cluster 'x'"),
        (lambda kc: kc["contexts"][0]["context"].update(user="x"), "unknown user 'x'"),
        (lambda kc: kc["clusters"][0]["cluster"].pop("server"), "has no server"),
        (
            lambda kc: kc["clusters"][0]["cluster"].update({"certificate-authority-data": "!!"}),
            "certificate-authority-data .* not valid base64",
        ),
        (
            lambda kc: kc["users"][0].update(user={"auth-provider": {"name": "gcp"}}),
            "auth-provider 'gcp'.*exec",
        ),
        (lambda kc: kc.update(clusters={"a": 1}), "clusters must be a list"),
        (
            lambda kc: kc["users"][0].update(user={"username": "u", "password": "p"}),
            "basic auth",
        ),
    ],
)
def test_bad_kubeconfigs(tmp_path: Path, mutate: Any, message: str) -> None:
    kc = _kubeconfig("https://k:1")
    mutate(kc)
    with pytest.raises(ConfigError, match=message):
        Config.from_kubeconfig(_write(tmp_path / "c", kc))


def test_unparseable_and_missing_kubeconfig(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("clusters: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Config.from_kubeconfig(bad)
    with pytest.raises(ConfigError, match="no kubeconfig file found"):
        Config.from_kubeconfig(tmp_path / "absent")


# -- exec credential plugins -------------------------------------------------------------

PLUGIN = """
import json, os, sys
count_file = sys.argv[1]
n = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(n))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
open(count_file + ".info", "w").write(json.dumps(info))
status = {"token": "exec-%d-%s" % (n, os.environ.get("EXTRA", ""))}
if len(sys.argv) > 2:
    status["expirationTimestamp"] = sys.argv[2]
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
"""


def _exec_kubeconfig(
    tmp_path: Path, server: str, args: list[str], api_version: str, **extra: Any
) -> Path:
    script = _write(tmp_path / "plugin.py", PLUGIN)
    user = {
        "exec": {
            "apiVersion": api_version,
            "command": sys.executable,
            "args": [str(script), *args],
            "env": [{"name": "EXTRA", "value": "x"}],
            "installHint": "install the plugin",
            **extra,
        }
    }
    return _write(tmp_path / "config", _kubeconfig(server, user=user))


@pytest.mark.parametrize(
    "api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
)
def test_exec_plugin_cached_until_expiry(
    api: FakeAPI, pki: PKI, tmp_path: Path, api_version: str
) -> None:
    count = tmp_path / "count"
    path = _exec_kubeconfig(
        tmp_path,
        api.url,
        [str(count), "2999-01-01T00:00:00Z"],
        api_version,
        provideClusterInfo=True,
    )
    with Config.from_kubeconfig(path, ca_data=pki.ca.cert_pem) as cfg:
        for _ in range(3):
            cfg.client(ConfigMap).get("a")
    assert count.read_text() == "1"
    assert {r.headers["Authorization"] for r in api.requests} == {"Bearer exec-1-x"}
    info = json.loads((tmp_path / "count.info").read_text())
    assert info["spec"]["cluster"]["server"] == api.url and info["spec"]["interactive"] is False


def test_exec_plugin_rerun_after_expiry_and_401(pki: PKI, tmp_path: Path) -> None:
    def handler(req: Request) -> Reply:
        if req.headers["Authorization"] == "Bearer exec-3-x":
            return Reply(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
        return Reply(body=CM)

    count = tmp_path / "count"
    with FakeAPI(handler, pki) as api:
        path = _exec_kubeconfig(
            tmp_path,
            api.url,
            [str(count), "2000-01-01T00:00:00Z"],
            "client.authentication.k8s.io/v1",
        )
        with Config.from_kubeconfig(path, ca_data=pki.ca.cert_pem) as cfg:
            cfg.client(ConfigMap).get("a")  # run 1
            cfg.client(ConfigMap).get("a")  # expired: run 2
            cfg.client(ConfigMap).get("a")  # expired: run 3 -> 401 -> run 4
        tokens = [r.headers["Authorization"] for r in api.requests]
    assert tokens == ["Bearer exec-1-x", "Bearer exec-2-x", "Bearer exec-3-x", "Bearer exec-4-x"]


def test_exec_plugin_failures(tmp_path: Path) -> None:
    kc = _kubeconfig(
        "https://k:1",
        user={
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "nope-xyz",
                "installHint": "brew install nope",
            }
        },
    )
    with (
        Config.from_kubeconfig(_write(tmp_path / "c", kc)) as cfg,
        pytest.raises(ConfigError, match=r"'nope-xyz' not found.*brew install nope"),
    ):
        cfg.client(ConfigMap).get("a")
    failing = _write(tmp_path / "fail.py", "import sys; sys.stderr.write('denied'); sys.exit(3)")
    kc["users"][0]["user"]["exec"].update(command=sys.executable, args=[str(failing)])
    with (
        Config.from_kubeconfig(_write(tmp_path / "c", kc)) as cfg,
        pytest.raises(ConfigError, match="exited with 3: denied"),
    ):
        cfg.client(ConfigMap).get("a")
    kc["users"][0]["user"]["exec"]["apiVersion"] = "client.authentication.k8s.io/v9"
    with pytest.raises(ConfigError, match="not supported"):
        Config.from_kubeconfig(_write(tmp_path / "c", kc))


# -- in-cluster ----------------------------------------------------------------------------


def test_in_cluster_with_token_rotation(
    api: FakeAPI, pki: PKI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = api.url.rsplit(":", 1)[1]
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    sa = tmp_path / "sa"
    sa.mkdir()
    _write(sa / "token", "first\n")
    _write(sa / "ca.crt", pki.ca.cert_pem.decode())
    _write(sa / "namespace", "ops\n")
    with Config.in_cluster(service_account_dir=sa) as cfg:
        assert (cfg.server, cfg.namespace) == (api.url, "ops")
        cfg.client(ConfigMap).get("a")
        cfg.auth.check_interval = 0  # type: ignore[attr-defined]
        # kubelet-style rotation: new file swapped in atomically
        _write(sa / "token.new", "second\n")
        os.replace(sa / "token.new", sa / "token")
        cfg.client(ConfigMap).get("a")
    assert [r.headers["Authorization"] for r in api.requests] == ["Bearer first", "Bearer second"]
    assert api.requests[0].path == "/api/v1/namespaces/ops/configmaps/a"


def test_in_cluster_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST"):
        Config.in_cluster(service_account_dir=tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError, match=r"token .* is missing"):
        Config.in_cluster(service_account_dir=tmp_path)
    _write(tmp_path / "token", "t")
    with Config.in_cluster(service_account_dir=tmp_path) as cfg:
        assert cfg.server == "https://[fd00::1]:443" and cfg.namespace == "default"
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="service-account token"):
        Config.load()  # no kubeconfig: falls back to in-cluster, default SA dir absent


def test_tls_server_name(api: FakeAPI, pki: PKI, tmp_path: Path) -> None:
    # the server certificate names localhost and 127.0.0.1 only
    with Config(api.url, token="t", ca_data=pki.ca.cert_pem, tls_server_name="localhost") as cfg:
        assert cfg.client(ConfigMap).get("a").metadata is not None
    with (
        Config(
            api.url,
            token="t",
            ca_data=pki.ca.cert_pem,
            tls_server_name="wrong.example",
            max_retries=0,
        ) as cfg,
        pytest.raises(TransportError, match="TLS error"),
    ):
        cfg.client(ConfigMap).get("a")
    extra: dict[str, Any] = {
        "tls-server-name": "localhost",
        "certificate-authority-data": _b64(pki.ca.cert_pem),
    }
    with Config.from_kubeconfig(_write(tmp_path / "c", _kubeconfig(api.url, **extra))) as cfg:
        assert cfg.client(ConfigMap).get("a").metadata is not None


def test_interactive_exec_plugin_rejected(tmp_path: Path) -> None:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "x",
            "interactiveMode": "Always",
        }
    }
    with pytest.raises(ConfigError, match="interactive"):
        Config.from_kubeconfig(_write(tmp_path / "c", _kubeconfig("https://k:1", user=user)))


def test_kubeconfig_overrides_replace_the_other_form(tmp_path: Path, pki: PKI) -> None:
    ca = _write(tmp_path / "ca.crt", pki.other_ca.cert_pem.decode())
    kc = _kubeconfig("https://k:1", **{"certificate-authority": str(ca)})
    with Config.from_kubeconfig(_write(tmp_path / "c", kc), ca_data=pki.ca.cert_pem) as cfg:
        assert cfg.session.verify != str(ca)
        assert Path(str(cfg.session.verify)).read_bytes() == pki.ca.cert_pem


def test_unreachable_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with Config(f"https://127.0.0.1:{port}", token="t", max_retries=2) as cfg:
        backoffs: list[int] = []
        monkeypatch.setattr(cfg.transport, "_backoff", lambda a, r, m: backoffs.append(a))
        with pytest.raises(TransportError, match=f"cannot connect to https://127.0.0.1:{port}"):
            cfg.client(ConfigMap).create(CM)
        assert backoffs == [0, 1]  # never sent, so even a POST is retried


def test_client_certificate_loaded_once_not_per_request(
    api: FakeAPI, pki: PKI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crt = _write(tmp_path / "c.crt", pki.client.cert_pem.decode())
    key = _write(tmp_path / "c.key", pki.client.key_pem.decode())
    ca = _write(tmp_path / "ca.crt", pki.ca.cert_pem.decode())
    with Config(api.url, ca_file=ca, client_cert_file=crt, client_key_file=key) as cfg:
        client = cfg.client(ConfigMap)
        client.get("a")
        looked: list[str] = []
        real_exists, real_isdir = os.path.exists, os.path.isdir
        monkeypatch.setattr(os.path, "exists", lambda p: looked.append(str(p)) or real_exists(p))
        monkeypatch.setattr(os.path, "isdir", lambda p: looked.append(str(p)) or real_isdir(p))
        for _ in range(5):
            client.get("a")
        monkeypatch.undo()
        assert looked == [], f"requests looked at the filesystem per request: {looked}"
        assert cfg.transport.pool_stats()["connections"] == 1
    assert all(r.client_cert is not None for r in api.requests[-6:])


def test_unreadable_client_certificate_is_a_clear_transport_error(
    api: FakeAPI, pki: PKI, tmp_path: Path
) -> None:
    crt = _write(tmp_path / "c.crt", pki.client.cert_pem.decode())
    key = _write(tmp_path / "c.key", pki.client.key_pem.decode())
    ca = _write(tmp_path / "ca.crt", pki.ca.cert_pem.decode())
    # One retry (not the default five, ~5 s of backoff): retried, it fails the same way.
    config = Config(api.url, ca_file=ca, client_cert_file=crt, client_key_file=key, max_retries=1)
    with config as cfg:
        key.write_text("not a key")
        with pytest.raises(TransportError, match="client certificate"):
            cfg.client(ConfigMap).get("a")


def test_rotated_client_certificates_keep_a_bounded_set_of_contexts_and_pools(
    api: FakeAPI, pki: PKI, tmp_path: Path
) -> None:
    ca = _write(tmp_path / "ca.crt", pki.ca.cert_pem.decode())
    with Config(api.url, ca_file=ca) as cfg:
        adapter = cfg.transport.session.get_adapter(api.url)
        certs = []
        for i in range(6):  # as an exec plugin writes each new credential to new files
            crt = _write(tmp_path / f"c{i}.crt", pki.client.cert_pem.decode())
            key = _write(tmp_path / f"c{i}.key", pki.client.key_pem.decode())
            certs.append((str(crt), str(key)))
            cfg.transport.session.cert = certs[-1]
            cfg.client(ConfigMap).get("a")
        assert api.requests[-1].client_cert is not None
        kept = set(adapter._cert_contexts)
        assert kept == set(certs[-4:])
        assert {key[2] for key in adapter._pools} <= kept | {None}
