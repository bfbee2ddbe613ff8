"""How a Go client (kube-apiserver's webhook client) fares when the server closes an idle
keep-alive connection just as the client reuses it, by the way the server closes it.

A small TLS server answers POSTs and, after each answer, waits `--idle-ms` plus up to 2 ms for
the next request; if none came, it closes the connection: `fin` (close_notify, then close: a
FIN, what the webhook server does), `linger` (close_notify, shutdown(SHUT_WR), read until EOF
for at most 0.5 s) or `rst` (SO_LINGER 0: an RST). The client (`close_race/main.go`, built
with the `go` on PATH or /usr/lib/go-*/bin) pauses as long after each answer, so that its next
request and the server's close often cross. Requires a Go toolchain; results in
`close-race-results.md`.

    python bench/close_race.py [--requests 3000] [--idle-ms 20] [--modes fin,linger,rst]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import random
import re
import select
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

from cloudcoil_sync.testing._internal.tls import CertificateAuthority, server_context

HERE = Path(__file__).resolve().parent
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def go_binary() -> str:
    found = shutil.which("go") or next(iter(sorted(glob.glob("/usr/lib/go-*/bin/go"))), None)
    if found is None:
        raise SystemExit("close_race.py needs a Go toolchain (go on PATH)")
    return found


def build_client(workdir: Path) -> Path:
    binary = workdir / "close-race"
    env = {**os.environ, "GOCACHE": str(workdir / "cache"), "GOPATH": str(workdir / "gopath")}
    env.update(GOFLAGS="-mod=mod", GOPROXY="off", GO111MODULE="on")
    source = workdir / "src"
    source.mkdir()
    shutil.copy(HERE / "close_race" / "main.go", source / "main.go")
    (source / "go.mod").write_text("module closerace\n\ngo 1.21\n")
    subprocess.run([go_binary(), "build", "-o", str(binary), "."], cwd=source, env=env, check=True)
    return binary


def read_request(tls: ssl.SSLSocket, buffer: bytes) -> tuple[bool, bytes]:
    """One request's head and body (by Content-Length); (False, b"") when the client closed."""
    while b"\r\n\r\n" not in buffer:
        chunk = tls.recv(65536)
        if not chunk:
            return False, b""
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    match = re.search(rb"(?i)content-length: *(\d+)", head)
    length = int(match.group(1)) if match else 0
    while len(rest) < length:
        chunk = tls.recv(65536)
        if not chunk:
            return False, b""
        rest += chunk
    return True, rest[length:]


def close(tls: ssl.SSLSocket, mode: str) -> None:
    if mode == "rst":
        tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return
    tls.setblocking(False)
    with contextlib.suppress(OSError):
        tls.unwrap()  # close_notify; the peer's is not awaited
    if mode == "linger":
        with socket.socket(fileno=os.dup(tls.fileno())) as raw, contextlib.suppress(OSError):
            raw.shutdown(socket.SHUT_WR)
            raw.settimeout(0.5)
            while raw.recv(65536):
                pass


def serve(tls: ssl.SSLSocket, mode: str, idle: float) -> None:
    buffer = b""
    try:
        while True:
            complete, buffer = read_request(tls, buffer)
            if not complete:
                return
            tls.sendall(ANSWER)
            if buffer or tls.pending():
                continue
            if not select.select([tls], [], [], idle + random.uniform(0, 0.002))[0]:
                close(tls, mode)
                return
    except (OSError, ValueError):
        pass
    finally:
        tls.close()


def run(
    mode: str, client: Path, context: ssl.SSLContext, requests: int, idle_ms: int
) -> dict[str, int]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                raw, _ = listener.accept()
                tls = context.wrap_socket(raw, server_side=True)
            except OSError:
                if listener.fileno() < 0:
                    return
                continue
            threading.Thread(target=serve, args=(tls, mode, idle_ms / 1000), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    url = f"https://127.0.0.1:{port}/validate"
    try:
        result = subprocess.run(
            [str(client), url, str(requests), str(idle_ms)],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
            timeout=requests * (idle_ms + 50) / 1000 + 60,
        )
    finally:
        listener.close()
    counts: dict[str, int] = {}
    for outcome, count in json.loads(result.stdout).items():
        outcome = re.sub(r"127\.0\.0\.1:\d+", "A", outcome)  # one key per kind of error
        counts[outcome] = counts.get(outcome, 0) + count
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--idle-ms", type=int, default=20)
    parser.add_argument("--modes", default="fin,linger,rst")
    args = parser.parse_args()
    ca = CertificateAuthority("close-race")
    context = server_context(ca.issue(("127.0.0.1",)))
    print(f"load {os.getloadavg()[0]:.2f}; {args.requests} requests, idle {args.idle_ms} ms")
    with tempfile.TemporaryDirectory() as workdir:
        client = build_client(Path(workdir))
        for mode in args.modes.split(","):
            counts = run(mode, client, context, args.requests, args.idle_ms)
            failed = sum(v for k, v in counts.items() if k != "200")
            print(
                f"{mode}: {failed} of {args.requests} failed {json.dumps(counts, sort_keys=True)}"
            )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
