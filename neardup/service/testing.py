"""Helpers to run the service in tests and benchmarks.

* :func:`serve_in_thread` -- run an app under uvicorn in a background thread on a free
  loopback port (fast, in-process).
* :class:`ServerProcess` -- run ``python -m neardup serve`` as a child process (for SIGKILL /
  restart tests and benchmarks), wait until ``/healthz`` answers, kill or stop it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import ServiceUnavailableError

__all__ = ["ServerProcess", "free_port", "serve_in_thread", "wait_healthy"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host`` (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_healthy(
    url: str, timeout: float = 60.0, *, proc: subprocess.Popen[bytes] | None = None
) -> float:
    """Poll ``url/healthz`` until it answers 200; return the seconds waited.

    Raises :class:`ServiceUnavailableError` on timeout or when ``proc`` exits first.
    """
    import httpx

    t0 = time.perf_counter()
    deadline = t0 + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise ServiceUnavailableError(
                f"the server exited with code {proc.returncode} before serving"
            )
        try:
            r = httpx.get(url + "/healthz", timeout=2.0)
            if r.status_code == 200:
                return time.perf_counter() - t0
        except httpx.TransportError:
            pass
        if time.perf_counter() > deadline:
            raise ServiceUnavailableError(f"{url} did not become healthy within {timeout} s")
        time.sleep(0.02)


@contextlib.contextmanager
def serve_in_thread(
    app: Any, *, host: str = "127.0.0.1", timeout: float = 300.0, port: int = 0
) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a daemon thread; yield its base URL; stop it on exit.

    The socket is bound before the server starts, so there is no port race. ``port``: a
    given port (to serve again at the same URL after a stop), else a free one.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    config = getattr(getattr(app, "state", None), "config", None)
    if config is not None:  # the service's app: with its connection limits and timeouts
        from .connections import uvicorn_config

        uv_config = uvicorn_config(
            app,
            config,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=int(max(1, min(5, config.graceful_timeout_s))),
        )
    else:
        uv_config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
        )
    server = uvicorn.Server(uv_config)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # SystemExit from a failed startup, too
            errors.append(exc)

    thread = threading.Thread(target=run, name="neardup-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise ServiceUnavailableError(f"the test server did not start ({errors or 'timeout'})")
        time.sleep(0.005)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


def _kill_if_running(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


class ServerProcess:
    """``python -m neardup serve --data DIR`` in a child process on a free loopback port.

    Parameters
    ----------
    data_dir : str or Path
        The server's ``--data``.
    args : sequence of str, optional
        More ``neardup serve`` flags.
    env : dict, optional
        Extra environment variables (e.g. ``NEARDUP_TOKEN``).

    A server given no token (no ``--token``, ``--read-token``, ``--token-file`` or
    ``--no-auth`` in ``args``, no ``NEARDUP_TOKEN`` / ``NEARDUP_READ_TOKEN`` /
    ``NEARDUP_TOKEN_FILE`` in the environment) is started with ``--no-auth``: tests and
    benchmarks on loopback that do not exercise authentication.
    port : int, optional
        Port to use (default: a free one, kept across restarts).
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.args = list(args)
        self.env = dict(env or {})
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self.last_stderr = ""

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line that starts the server. Given a ``PYTHONPATH`` in ``env`` (a
        source tree to run), with ``-P``: ``python -m`` puts the working directory first on the
        module path, so a checkout there would be run instead (a benchmark comparing two trees
        from one of them ran that one twice)."""
        safe = ["-P"] if self.env.get("PYTHONPATH") else []
        return [
            sys.executable, *safe, "-m", "neardup", "serve", "--data", str(self.data_dir),
            "--port", str(self.port), "--log-level", "warning", *self.args, *self._auth_args(),
        ]  # fmt: skip

    def _auth_args(self) -> list[str]:
        """``["--no-auth"]`` when the server is given no token (see the class docstring)."""
        flags = ("--token", "--read-token", "--token-file", "--no-auth")
        if any(a.split("=", 1)[0] in flags for a in self.args):
            return []
        env = {**os.environ, **self.env}
        if any(env.get(k) for k in ("NEARDUP_TOKEN", "NEARDUP_READ_TOKEN", "NEARDUP_TOKEN_FILE")):
            return []
        return ["--no-auth"]

    def start(self, timeout: float = 180.0, *, wait: bool = True) -> float:
        """Start the server; with ``wait``, return the seconds until ``/healthz`` answered.

        Raises :class:`ServiceUnavailableError` (with the server's stderr) when it does not
        come up.
        """
        if self.proc is not None and self.proc.poll() is None:
            raise ServiceUnavailableError("the server is already running")
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _collect()
        env = {**os.environ, **self.env}
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=self._stderr, env=env
        )
        atexit.register(_kill_if_running, self.proc)  # never leave a server behind
        if not wait:
            return 0.0
        try:
            wait_healthy(self.url, timeout, proc=self.proc)
        except ServiceUnavailableError as exc:
            self.kill()
            raise ServiceUnavailableError(f"{exc}; stderr:\n{self.last_stderr}") from None
        return time.perf_counter() - t0

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit; return its exit code and keep its stderr."""
        if self.proc is None:
            return 0
        rc = self.proc.wait(timeout)
        self._collect()
        return rc

    def _collect(self) -> None:
        if self._stderr is not None:
            self._stderr.seek(0)
            self.last_stderr = self._stderr.read().decode("utf-8", "replace")
            self._stderr.close()
            self._stderr = None

    def kill(self) -> None:
        """SIGKILL the server (no flush, no cleanup) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.wait()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM the server (graceful: drain, flush, close) and return its exit code."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def rss_bytes(self) -> int:
        """Resident memory of the server process (0 when it cannot be read)."""
        if self.proc is None:
            return 0
        try:
            with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
        return 0

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
