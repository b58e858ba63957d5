"""``gang extender`` as a command, and its TLS: the process serves, stops on SIGTERM, and refuses
bad flags before it starts."""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from gang.cli import main
from gang.extender.server import ExtenderServer, server_ssl_context
from tests.extender.conftest import fixture_bytes

ROOT = Path(__file__).resolve().parents[2]
NODES_ARGS = "filter-args-nodes.json"

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(tmp: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.crt", cwd=tmp,
    )  # fmt: skip
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "")):
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=tmp,
        )  # fmt: skip
        extfile = tmp / f"{name}.ext"
        extfile.write_text(ext + "\n" if ext else "basicConstraints=CA:FALSE\n")
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-extfile", extfile.name, "-out", f"{name}.crt",
            cwd=tmp,
        )  # fmt: skip


@needs_openssl
async def test_tls_and_client_certificates(tmp_path: Path) -> None:
    make_pki(tmp_path)
    server_ctx = server_ssl_context(
        str(tmp_path / "server.crt"), str(tmp_path / "server.key"), str(tmp_path / "ca.crt")
    )
    server = ExtenderServer()
    await server.start("127.0.0.1", 0, server_ctx)
    url = f"https://127.0.0.1:{server.port}/gang-extender/filter"
    try:
        trusting = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.ClientError):  # no client certificate: refused
                async with http.post(url, data=fixture_bytes(NODES_ARGS), ssl=trusting):
                    pass
            with_cert = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
            with_cert.load_cert_chain(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
            async with http.post(url, data=fixture_bytes(NODES_ARGS), ssl=with_cert) as resp:
                assert resp.status == 200
                assert (await resp.json())["Error"] == ""
            with pytest.raises(aiohttp.ClientError):  # plain HTTP to the TLS port
                async with http.post(url.replace("https", "http"), data=b"{}"):
                    pass
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-client-ca", "ca.pem"], "--tls-client-ca needs --tls-cert"),
        (["--max-body-bytes", "0"], "--max-body-bytes must be at least 1"),
        (["--port", "70000"], "not a port number"),
        (["--token-file", "/nonexistent/token"], "--token-file"),
        (["--tls-cert", "/nonexistent/c", "--tls-key", "/nonexistent/k"], "TLS:"),
    ],
)
def test_bad_flags_stop_before_serving(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extender", *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def root_logger() -> Iterator[None]:
    """``gang extender`` configures logging; give the root logger back as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.usefixtures("root_logger")
def test_an_unusable_kubeconfig_or_port_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.kubeconfig")
    assert main(["extender", "--node-cache", "--kubeconfig", missing]) == 2
    assert "cannot configure the API client" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["extender", "--port", str(taken.getsockname()[1])]) == 1
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err


def test_an_empty_token_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = tmp_path / "token"
    token.write_text("\n")
    assert main(["extender", "--token-file", str(token)]) == 2
    assert "is empty" in capsys.readouterr().err


async def test_the_command_serves_until_sigterm(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gang",
        "extender",
        "--port",
        "0",
        "--prefix",
        "/ext",
        "--token-file",
        str(token),
        cwd=ROOT,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        port = None
        async with asyncio.timeout(20):
            while port is None:
                line = (await proc.stderr.readline()).decode()
                assert line, "the extender exited before serving"
                found = re.search(r"serving http://127\.0\.0\.1:(\d+)/ext/", line)
                port = int(found.group(1)) if found else None
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}/ext/filter"
            async with http.post(url, data=fixture_bytes(NODES_ARGS)) as resp:
                assert resp.status == 401
            headers = {"Authorization": "Bearer s3cret"}
            async with http.post(url, data=fixture_bytes(NODES_ARGS), headers=headers) as resp:
                assert resp.status == 200
                assert (await resp.json())["FailedNodes"] == {
                    "cpu-d": "Insufficient nvidia.com/gpu"
                }
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
