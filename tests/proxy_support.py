"""A small forwarding HTTP proxy on loopback, and a test CA, for the upstream
network tests: CONNECT tunnels (what https upstreams use) and absolute-form
plain-http requests, each recorded, optionally demanding Proxy-Authorization."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest


@dataclass
class ProxyLog:
    request_lines: list[str] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)


class ForwardProxy:
    """`async with ForwardProxy() as p:` listens on 127.0.0.1 and forwards bytes."""

    def __init__(self, *, require_auth: str | None = None, refuse: int | None = None) -> None:
        self.require_auth = require_auth
        self.refuse = refuse  # answer every request with this status (a policy refusal)
        self.log = ProxyLog()
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ForwardProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for task in list(self._tasks):
            task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {k.lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:-2])}
            self.log.request_lines.append(lines[0])
            self.log.authorizations.append(headers.get("proxy-authorization"))
            if self.refuse is not None:
                writer.write(b"HTTP/1.1 %d Forbidden\r\n\r\n" % self.refuse)
                await writer.drain()
                return
            if self.require_auth and headers.get("proxy-authorization") != self.require_auth:
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                await writer.drain()
                return
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:  # absolute form: forward the request as it came
                url = urlsplit(target)
                assert url.hostname is not None
                up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port or 80)
                up_writer.write(head)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except ConnectionError:
        pass
    finally:
        dst.close()


@dataclass
class LocalCA:
    ca: Path  # the CA certificate a client is told to trust
    cert: Path  # localhost's certificate, signed by the CA
    key: Path


def make_test_ca(directory: Path) -> LocalCA:
    """A private CA and a localhost certificate it signed (openssl CLI)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=directory)

    ca_subject = ["-subj", "/CN=tiergate test CA"]
    ca_ext = ["-addext", "basicConstraints=critical,CA:TRUE"]
    ca_ext += ["-addext", "keyUsage=critical,keyCertSign,cRLSign"]
    new_key = ["-newkey", "rsa:2048", "-nodes", "-days", "1"]
    openssl("req", "-x509", *new_key, "-keyout", "ca.key", "-out", "ca.pem", *ca_subject, *ca_ext)
    leaf = ["-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=localhost"]
    openssl("req", "-newkey", "rsa:2048", "-nodes", *leaf)
    (directory / "leaf.ext").write_text("subjectAltName=DNS:localhost\n")
    sign = ["-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1"]
    openssl("x509", "-req", "-in", "leaf.csr", *sign, "-out", "leaf.pem", "-extfile", "leaf.ext")
    return LocalCA(directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key")
