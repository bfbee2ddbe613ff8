"""The typed command layer: `Application`'s commands take the CLI's options as keywords, and the
helpers behind them take the definition they need, never the application."""

from __future__ import annotations

import dataclasses
import inspect
import threading
from typing import Any

import click
import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.application._internal.cli import build_cli
from cloudcoil_sync.application._internal.manifests import Definition
from cloudcoil_sync.application._internal.options import ManifestKeywords, ManifestOptions

from .models import PEM, Widget

#: CLI option → the keyword of the Application method, where their names differ.
RENAMED = {
    "without_webhooks": "include_webhooks",
    "ca_file": "ca_bundle",
    "quiet": "progress",
    # the optional objects' flags are one keyword: extras=Extras(...)
    "pod_disruption_budget": "extras",
    "network_policy": "extras",
    "api_server_cidr": "extras",
    "metrics_namespace": "extras",
    "cert_manager": "extras",
}
#: Options about the command's output, not the documents: no keyword.
CLI_ONLY = {"split"}  # manifests --split DIR: layout.write_split(app.manifests(...), DIR)


def settings_app() -> Application:
    app = Application("settings", namespace="ops", leader_election=True)
    app.controller(ConfigMap).reconcile()(lambda resource: None)
    return app


def webhook_app() -> Application:
    app = Application("widgets", namespace="ops", webhook=WebhookServer(ca_bundle=PEM))
    app.validate(Widget)(lambda request: None)
    return app


def keywords(method: Any) -> dict[str, inspect.Parameter]:
    """The method's keywords, those of ``**options: Unpack[ManifestKeywords]`` included (with
    `ManifestOptions`' defaults)."""
    found: dict[str, inspect.Parameter] = {}
    for parameter in inspect.signature(method).parameters.values():
        if parameter.name == "self":
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            assert parameter.annotation == "Unpack[ManifestKeywords]", parameter
            defaults = {field.name: field.default for field in dataclasses.fields(ManifestOptions)}
            assert defaults.keys() == ManifestKeywords.__annotations__.keys()
            for name, default in defaults.items():
                found[name] = inspect.Parameter(
                    name, inspect.Parameter.KEYWORD_ONLY, default=default
                )
            continue
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, parameter
        found[parameter.name] = parameter
    return found


def cli_defaults(command: str) -> dict[str, Any]:
    """Each option of the command and its default (None when it has none)."""
    group = build_cli(settings_app())
    found = group.get_command(click.Context(group), command)
    assert found is not None
    ctx = click.Context(found)
    defaults = {str(p.name): p.get_default(ctx, call=False) for p in found.params}
    # click 8.2+ reports "no default" as a sentinel rather than None.
    return {
        name: d if isinstance(d, bool | int | float | str) else None for name, d in defaults.items()
    }


@pytest.mark.parametrize("command", ["manifests", "install", "uninstall"])
def test_every_cli_option_is_a_keyword_of_the_method(command: str) -> None:
    method = keywords(getattr(settings_app(), command))
    defaults = cli_defaults(command)
    assert {"image", "timeout", "include_crds"} & set(defaults)
    for name, default in defaults.items():
        if name in CLI_ONLY:
            continue
        keyword = RENAMED.get(name, name)
        assert keyword in method, f"{command} --{name} has no keyword {keyword}"
        if keyword == name and default is not None:
            assert method[keyword].default == default, (command, name)


def test_to_yaml_takes_the_manifests_keywords() -> None:
    assert keywords(Application.to_yaml).keys() == keywords(Application.manifests).keys()
    app = settings_app()
    assert "kind: Deployment" in app.to_yaml(image="example/s:v1", replicas=2)
    with pytest.raises(TypeError, match="imgae"):
        app.manifests(imgae="example/s:v1")  # type: ignore[call-arg]


def test_definition_is_what_manifests_need_frozen() -> None:
    definition = settings_app().definition()
    assert isinstance(definition, Definition)
    assert (definition.name, definition.namespace) == ("settings", "ops")
    assert definition.lease == ("settings", None) and definition.webhook is None
    assert [access.resource for access in definition.controllers] == [ConfigMap]
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.name = "other"  # type: ignore[misc]


def test_definition_validates_like_manifests() -> None:
    with pytest.raises(ValueError, match="controllers or webhooks"):
        Application("empty").definition()


def test_replace_webhook_is_the_applications_own_change() -> None:
    app = webhook_app()
    moved = dataclasses.replace(app.webhook, host="127.0.0.1", port=18443)
    app.replace_webhook(moved)
    assert app.webhook is moved
    with pytest.raises(ValueError, match="needs an application with a WebhookServer"):
        settings_app().replace_webhook(moved)
    with pytest.raises(TypeError, match="webhook must be a WebhookServer"):
        app.replace_webhook("127.0.0.1:18443")  # type: ignore[arg-type]
    app.validate_definition(freeze=True)
    with pytest.raises(RuntimeError, match="before running"):
        app.replace_webhook(moved)


def test_the_application_holds_its_run_state() -> None:
    app = settings_app()
    assert app.manager is None and not app.ready and not app.healthy
    stop = threading.Event()
    stop.set()
    app.run(stop=stop)  # stopped before it started: returns at once, never runs again
    assert app.manager is None and not app.ready
    with pytest.raises(RuntimeError, match="only run once"):
        app.run(stop=stop)
    with pytest.raises(RuntimeError, match="stopped before becoming ready"):
        app.wait_ready(1)
