"""``gang sim serve`` in its own process, and the real kubectl against it.

The kubectl tests (``test_kubectl.py``, ``test_openapi.py``) share this: a server started the
way a user starts one, a kubeconfig it writes, and a kubectl with its own cache directory (so
discovery and OpenAPI are fetched afresh by every test).
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def kubectl_path() -> str:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is not on PATH: the kubectl tests need the real one"
    return kubectl


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str, kubeconfig: Path, cache: Path):
        self.proc = proc
        self.url = url
        self.kubeconfig = kubeconfig
        self.cache = cache

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": ctype, **(headers or {})},
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """kubectl with this server's kubeconfig; the caller judges the outcome."""
        return subprocess.run(
            [kubectl_path(), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache),
             *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            input=stdin,
        )  # fmt: skip

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = self.run(*args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def kubectl_fails(self, *args: str, stdin: str | None = None) -> str:
        """Run kubectl expecting a failure; its stderr."""
        done = self.run(*args, stdin=stdin)
        assert done.returncode != 0, done.stdout
        return done.stderr


@contextmanager
def gang_sim_serve(tmp_path: Path, *extra: str, nodes: str = "3:gpu=8") -> Iterator[Served]:
    """Start ``gang sim serve`` (with ``extra`` flags), wait for it, stop it and check its exit."""
    if shutil.which("kubectl") is None:  # as before: a machine without kubectl cannot run these
        pytest.skip("kubectl is not installed (not on PATH); the kubectl tests need the real one")
    port = free_port()
    kubeconfig = tmp_path / "kc"
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gang", "sim", "serve", "--port", str(port),
         "--kubeconfig", str(kubeconfig), "--nodes", nodes, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, proc.communicate()
            if kubeconfig.exists():
                try:
                    with urllib.request.urlopen(url + "/version", timeout=1) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
            assert time.monotonic() < deadline, "gang sim serve did not come up"
            time.sleep(0.05)
        yield Served(proc, url, kubeconfig, tmp_path / "kube-cache")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, (proc.returncode, err)
    count = nodes.split(":", 1)[0]
    if "--from-snapshot" in extra:  # the snapshot's nodes and the pools' together
        assert f"gang sim: serving {url} with " in out
    else:
        assert f"gang sim: serving {url} with {count} nodes" in out
    assert f"kubeconfig written to {kubeconfig}" in out


@contextmanager
def gang_run(
    kubeconfig: Path, log: Path, port: int = 0, ready_url: str | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``gang run`` against ``kubeconfig`` in its own process, its output in ``log``; with
    ``ready_url`` (its server, on ``port``) waited for until ready. Stopped by SIGTERM after,
    and its clean exit checked."""
    with log.open("wb") as out:
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "gang", "run", "--kubeconfig", str(kubeconfig),
             "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        if ready_url is not None:
            _wait_ready(ready_url, scheduler, log)
        yield scheduler
    finally:
        scheduler.send_signal(signal.SIGTERM)
        try:
            scheduler.wait(timeout=15)
        except subprocess.TimeoutExpired:
            scheduler.kill()
            scheduler.wait()
    assert scheduler.returncode == 0, log.read_text()[-5000:]


def _wait_ready(url: str, scheduler: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert scheduler.poll() is None, log.read_text()[-5000:]
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "gang run did not become ready\n" + log.read_text()
        time.sleep(0.1)
