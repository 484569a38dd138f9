"""What the browser tests run: ``saga up --console`` with the real document pipeline
(one worker process per step and the console), and a headless Chromium driven by
Playwright. Debian's ``chromium`` is used (``./dev test`` installs it when missing);
Playwright's own browser download is never needed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from saga.state.keys import Keys
from tests.console.support import REPO
from tests.executor.support import free_port, http_status

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
ARTEFACTS = REPO / "tmp" / "artefacts" / "console"
"""Screenshots of every browser test (not committed; CI keeps them as artefacts)."""
DOCS_SHOT = REPO / "docs" / "console-saga.png"
"""The README's screenshot, rewritten when SAGA_DOCS_SCREENSHOTS=1."""


def chromium_or_skip() -> str:
    """The Chromium executable, or a skip that says why there is none."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        pytest.skip("playwright is not installed (it is in the dev extra: ./dev installs it)")
    found = os.environ.get("SAGA_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(found).exists():
        pytest.skip("no chromium: `apt-get install chromium` (./dev test does it as root)")
    return found


@dataclass
class Stack:
    """A running ``saga up --console``: where the console is and the token it printed."""

    proc: subprocess.Popen[bytes]
    url: str
    token: str
    log: Path
    env: dict[str, str]
    docs: Path

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def wait_ready(self, within: float = 60) -> None:
        """Until the printed token is read and the console answers /readyz."""
        port = int(self.url.rsplit(":", 1)[1])
        deadline = time.monotonic() + within
        while not self.token or http_status(port, "/readyz") != 200:
            assert self.proc.poll() is None, self.tail()
            assert time.monotonic() < deadline, "saga up --console did not start:\n" + self.tail()
            found = re.search(r"^(saga_[A-Za-z0-9_-]{40,})$", self.log.read_text(), re.M)
            self.token = found.group(1) if found else ""
            time.sleep(0.1)
        assert f"saga up: console at {self.url}/" in self.log.read_text()


def up_env(redis_url: str, keys: Keys, data: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SAGA_") and k not in ("REDIS_URL", "PYTHONPATH")}  # fmt: skip
    env.update(
        REDIS_URL=redis_url, SAGA_KEY_PREFIX=keys.prefix, SAGA_PARTITIONS=str(keys.partitions),
        SAGA_DATA_DIR=str(data), SAGA_LOG_FORMAT="json", SAGA_CONSOLE_PORT=str(port),
        SAGA_BLOCK_MS="100", SAGA_PROMOTE_INTERVAL="0.2", PYTHONPATH=str(REPO),
        LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1",
    )  # fmt: skip
    return env


@contextlib.contextmanager
def saga_up(redis_url: str, keys: Keys, tmp: Path) -> Iterator[Stack]:
    """``saga up --console``, started (``Stack.wait_ready`` waits for it; a browser can
    launch meanwhile) and stopped with SIGINT (as Ctrl-C would) at the end."""
    port = free_port()
    env = up_env(redis_url, keys, tmp / "data", port)
    env["SAGA_DOCUMENT_ROOTS"] = str(tmp / "docs")  # the fetch policy reads only from there
    log = tmp / "up.log"
    with open(log, "wb") as out:
        argv = [sys.executable, "-m", "saga.cli.main", "up", "--console"]
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    stack = Stack(proc, f"http://127.0.0.1:{port}", "", log, env, tmp / "docs")
    stack.docs.mkdir(exist_ok=True)
    try:
        yield stack
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


async def shot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under the artefacts directory."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTEFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


def provide(path: Path) -> None:
    """The document appears where the saga expects it (a real PDF, a shipped sample)."""
    shutil.copyfile(REPO / "saga" / "samples" / "annual_panel.pdf", path)
