"""Differential fidelity: the same requests to a real kube-apiserver and to the emulator.

    python bench/fidelity.py [--kubeconfig PATH] [--record] [--replay] [--json out.json]

The cases (``tests/recordings/fidelity_cases.py``: creates, updates, merge and JSON patches,
server-side apply and status writes over the Widget CRD of ``examples/widget_operator.py`` and
a CRD using every structural-schema feature and CEL rule) run in order in a fresh namespace
``fid39`` on both servers. Answers are compared on status, warnings and body (Status reason,
message and causes, or the stored object) with volatile values (uids, resourceVersions,
timestamps) left out. It prints the share of identical answers and every difference.

``--record`` also writes the real server's answers to
``tests/recordings/fidelity/kube-apiserver-1.32.json``, which CI replays against the emulator
(``tests/testing/test_fidelity.py``); ``--replay`` compares that recording with the emulator
and needs no cluster. The namespace and CRDs are deleted afterwards.

``--record --only PREFIX`` sends only the cases whose names start with PREFIX, without the
namespace and CRDs of the others (for cases that need none, e.g. refused CRD creations), and
merges their answers into the recording in ``cases()`` order.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests
from cluster import raw_session
from recordings.fidelity import FIDELITY, Server, compare, run_cases, setup, teardown
from recordings.fidelity_cases import NS, cases, gadget_crd

from cloudcoil_sync.testing import Emulator

RECORDING = FIDELITY / "kube-apiserver-1.32.json"


def widget_crd() -> dict[str, Any]:
    from cloudcoil_sync.crd import CRD
    from examples.widget_operator import Widget

    return CRD(Widget).manifest()


def real_answers(kubeconfig: str | None, crds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    session, url = raw_session(kubeconfig)
    server = Server(url, session)
    pause = threading.Event()
    extra = [{"metadata": {"name": "badrules.fid39.example.com"}}]  # should it be created
    setup(server, NS, crds, lambda: pause.wait(1.0))
    try:
        return run_cases(server, cases(), lambda: pause.wait(3.0))
    finally:
        teardown(server, NS, crds + extra)


def record_only(kubeconfig: str | None, prefix: str) -> tuple[list[Any], list[Any]]:
    """The real answers to the cases named ``prefix*``, merged into the recording."""
    session, url = raw_session(kubeconfig)
    server = Server(url, session)
    recorded = json.loads(RECORDING.read_text())
    chosen = [case for case in cases() if case["name"].startswith(prefix)]
    try:
        fresh = {case["name"]: case for case in run_cases(server, chosen)}
    finally:
        teardown_crds(server, [{"metadata": {"name": "badrules.fid39.example.com"}}])
    old = {case["name"]: case for case in recorded["cases"]}
    merged = [fresh.get(case["name"]) or old[case["name"]] for case in cases()]
    recorded["cases"] = merged
    RECORDING.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return recorded["crds"], merged


def teardown_crds(server: Server, crds: list[dict[str, Any]]) -> None:
    for crd in crds:
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        server.send("DELETE", path, None, "application/json", {})


def emulator_answers(crds: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[Any]:
    with Emulator() as emu, tempfile.TemporaryDirectory() as tmp:
        ca = Path(tmp) / "ca.crt"
        ca.write_bytes(emu.ca_pem)
        session = requests.Session()
        session.verify = str(ca)
        session.headers["Authorization"] = f"Bearer {emu.admin_token}"
        server = Server(emu.url, session)
        setup(server, NS, crds, emu.settle)
        return run_cases(server, sent, emu.settle)


def report(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> dict[str, Any]:
    differences = {}
    for want, got in zip(expected, actual, strict=True):
        diff = compare(want["response"], got["response"], bool(want.get("status_only")))
        if diff:
            differences[want["name"]] = diff
    same = len(expected) - len(differences)
    print(f"{same} of {len(expected)} answers identical ({100 * same / len(expected):.1f} %)")
    for name, diff in differences.items():
        print(f"- {name}:")
        for line in diff:
            print(f"    {line}")
    return {"cases": len(expected), "identical": same, "differences": differences}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--record", action="store_true", help="write the real answers to tests/")
    parser.add_argument("--replay", action="store_true", help="recording vs emulator, no cluster")
    parser.add_argument("--json", type=Path, help="write the figures and differences here")
    parser.add_argument("--only", help="with --record: record only the cases named PREFIX*")
    args = parser.parse_args()
    if args.only:
        crds, expected = record_only(args.kubeconfig, args.only)
    elif args.replay:
        recorded = json.loads(RECORDING.read_text())
        crds, expected = recorded["crds"], recorded["cases"]
    else:
        crds = [widget_crd(), gadget_crd()]
        expected = real_answers(args.kubeconfig, crds)
        if args.record:
            FIDELITY.mkdir(exist_ok=True)
            doc = {"server": "kube-apiserver v1.32.0-beta.0", "crds": crds, "cases": expected}
            RECORDING.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    actual = emulator_answers(crds, expected)
    figures = report(expected, actual)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
