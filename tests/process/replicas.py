"""Operator replicas as separate processes, each with its own token (so the emulator's request
log tells their requests apart), logging the monotonic time of every pass start and of the
stop signal (CLOCK_MONOTONIC is system-wide: comparable with the emulator's log times).

A pass "starts" when the framework admits it (`Term.check`, the one place that refuses passes
once stopping). The stamp is read *before* that check: an admitted pass's time then precedes
any stop it was admitted ahead of. A stamp taken in the reconciler instead can follow the stop
line: the signal handler may run between the admission and the reconciler's first line (seen in
CI, 6 ms after the stop, one GIL switch interval)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal import serve
from cloudcoil_sync.testing._internal.api import LogEntry

REPO = Path(__file__).resolve().parents[2]
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/settings"

APP = textwrap.dedent(
    """
    import logging
    import os
    import pathlib
    import time

    from cloudcoil.models.kubernetes.core.v1 import ConfigMap
    from cloudcoil_sync.application import Application
    from cloudcoil_sync.controller import Context, LeaderElection
    from cloudcoil_sync.controller._internal.term import Term

    LOG = pathlib.Path(os.environ["PASS_LOG"])
    NAME = os.environ["REPLICA"]


    def note(text: str, at: float | None = None) -> None:
        at = time.monotonic() if at is None else at
        with LOG.open("a") as log:
            log.write(f"{at} {text}\\n")


    class StopStamp(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("Received SIG"):
                note("stop")


    logging.getLogger("cloudcoil_sync").addHandler(StopStamp())
    admit = Term.check


    def stamped_check(term: Term) -> None:
        at = time.monotonic()  # before the check: a pass it admits started before any stop
        admit(term)  # raises PassRefused: not started, no stamp
        note("start", at)


    Term.check = stamped_check
    election = LeaderElection(
        "settings",
        identity=NAME,
        lease_duration=float(os.environ["LEASE_DURATION"]),
        renew_deadline=float(os.environ["RENEW_DEADLINE"]),
        retry_period=0.2,
    )
    app = Application("settings", leader_election=election)
    configs = app.controller(
        ConfigMap,
        label_selector="example.com/manage=true",
        workers=4,
        shutdown_timeout=float(os.environ["SHUTDOWN_TIMEOUT"]),
    )


    @configs.reconcile()
    def reconcile(config: ConfigMap, ctx: Context) -> ConfigMap:
        time.sleep(float(os.environ["PASS_SECONDS"]))  # the pass's work: a queue stays deep
        ctx.event("Reconciled", f"by {NAME}")
        config.data = {**(config.data or {}), "managed-by": NAME}
        return config


    if __name__ == "__main__":
        app.main()
    """
)


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    passes: Path
    stderr: Path
    user: str = field(init=False)

    def __post_init__(self) -> None:
        self.user = f"replica-{self.name}"

    def stamps(self, what: str) -> list[float]:
        """Monotonic times of the lines of `what` ("start" or "stop")."""
        if not self.passes.exists():
            return []
        lines = self.passes.read_text().splitlines()
        return [float(line.split()[0]) for line in lines if line.split()[1:2] == [what]]

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def stopped(self) -> bool:
        """Whether the kernel has stopped the process (SIGSTOP delivered, not only sent)."""
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")

    def output(self) -> str:
        return self.stderr.read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait(30)


def writes(log: list[LogEntry], user: str, *, lease: bool = False) -> list[LogEntry]:
    """`user`'s non-read requests, without (or only) its Lease requests."""
    return [
        e
        for e in log
        if e.user == user and e.method not in ("GET", "HEAD") and (e.path == LEASE_PATH) == lease
    ]


def start_replica(
    kube: Emulator,
    directory: Path,
    name: str,
    *,
    lease_duration: float = 6,
    renew_deadline: float = 5,
    shutdown_timeout: float = 2,
    pass_seconds: float = 0.3,
) -> Replica:
    directory.mkdir(parents=True, exist_ok=True)
    app = directory / "app.py"
    app.write_text(APP)
    token = f"token-{name}"
    kube.add_token(token, f"replica-{name}", ("system:masters",))
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(serve.kubeconfig(kube, token=token)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "CLOUDCOIL_"))}
    env.update(
        KUBECONFIG=str(kubeconfig),
        PYTHONPATH=str(REPO),
        PASS_LOG=str(directory / "passes"),
        REPLICA=name,
        LEASE_DURATION=str(lease_duration),
        RENEW_DEADLINE=str(renew_deadline),
        SHUTDOWN_TIMEOUT=str(shutdown_timeout),
        PASS_SECONDS=str(pass_seconds),
    )
    stderr = directory / "stderr"
    with stderr.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, str(app), "run"],
            cwd=directory,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    return Replica(name, process, directory / "passes", stderr)
