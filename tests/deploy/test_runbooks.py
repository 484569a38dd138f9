"""The runbooks in deploy/README.md work as written for the ACL user they recommend:
each bash block (its `kubectl` and `helm` lines aside) runs against a real server, as
that user, with a worker and the controller running as that user too."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.state.connection import connect
from saga.state.keys import Keys
from tests.controller.support import Procs
from tests.deploy.chart import CHART, REPO
from tests.executor.support import free_port, states, wait_until, worker_base_env

README = REPO / "deploy" / "README.md"
PASSWORD = "s3cret with spaces & symbols:/@"
REDIS_CLI = shutil.which("redis-cli")
PARTITIONS = 4
CLI = [sys.executable, "-m", "saga.cli.main"]
REFUSED = re.compile(
    r"^(ERR|NOPERM|NOAUTH|WRONGPASS|WRONGTYPE)\b|\(error\)|Traceback|command not found", re.M
)


def runbooks() -> list[tuple[str, str]]:
    """(heading, bash) of every code block in the Runbooks section."""
    text = README.read_text()
    section = text[text.index("## 9. Runbooks") : text.index("## 10.")]
    blocks, heading = [], "conventions"
    for part in re.split(r"(^### .*$)", section, flags=re.M):
        if part.startswith("### "):
            heading = part[4:].strip()
            continue
        blocks += [(heading, code) for code in re.findall(r"```bash\n(.*?)```", part, re.S)]
    return blocks


def conventions() -> str:
    (code,) = [c for _, c in runbooks() if "saga() {" in c]
    return code


def without_cluster_commands(code: str) -> str:
    """The block without its kubectl/helm commands (continuations and loops included)."""
    out, skip_continuation, in_loop = [], False, False
    for line in code.splitlines():
        words = line.split()
        if skip_continuation:
            skip_continuation = line.rstrip().endswith("\\")
        elif in_loop:
            in_loop = not line.strip().startswith("done")
        elif words and words[0] in ("kubectl", "helm"):
            skip_continuation = line.rstrip().endswith("\\")
        elif words and words[0] == "for" and "kubectl" in line:
            in_loop = True
        else:
            out.append(line)
    return "\n".join(out)


def test_runbooks_exec_into_the_controller() -> None:
    """`saga` runs in the controller pod (always up), never a worker that may be at zero."""
    conv = conventions()
    assert 'exec -i deploy/$REL-saga-controller -c controller -- saga "$@"' in conv
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    for text in (README.read_text(), notes):
        for line in text.splitlines():
            if "kubectl" in line and " exec " in line:
                assert "controller" in line, line


def test_no_runbook_uses_a_command_the_acl_user_is_refused() -> None:
    """ROLE, CONFIG and KEYS are @dangerous: the recommended user cannot run them."""
    for _, code in runbooks():
        assert not re.search(r"\bR (ROLE|CONFIG|KEYS|DEBUG|FLUSH\w*)\b", code), code


def acl_rule() -> list[str]:
    """The ACL rules the README recommends for user `saga`, with our password."""
    (rule,) = re.findall(r"`(ACL SETUSER saga [^`]+)`", README.read_text())
    words = shlex.split(rule)[3:]
    return [f">{PASSWORD}" if w == ">PASSWORD" else w for w in words]


def in_partition_0(prefix: str) -> str:
    return next(f"{prefix}{i}" for i in range(100) if zlib.crc32(f"{prefix}{i}".encode()) % 4 == 0)


@pytest.mark.skipif(REDIS_CLI is None, reason="redis-cli is not installed (Debian: redis-tools)")
@pytest.mark.anyio
async def test_every_runbook_command_works_as_the_recommended_user(tmp_path: Path) -> None:
    """Each runbook block runs with no refusal (NOPERM, ERR), no traceback and no saga exit
    code above 1, against data that has a completed, a dead-lettered and a retried saga."""
    port = free_port()
    server = EmbeddedServer(data_dir=tmp_path / "redis", tied=True, port=port)
    server.start()
    procs = Procs(tmp_path)
    try:
        admin = connect(server.url)
        await admin.execute_command("ACL", "SETUSER", "saga", *acl_rule())
        await admin.aclose()
        url = f"redis://saga@127.0.0.1:{port}/0"
        env = worker_base_env(url, Keys("saga", PARTITIONS), tmp_path)
        env.update(REDIS_PASSWORD=PASSWORD, REDIS_HOST="127.0.0.1", REDIS_PORT=str(port))
        env.update(REDIS_USERNAME="saga", REDISCLI_AUTH=PASSWORD)
        init = await anyio.run_process([*CLI, "init"], cwd=REPO, env=env, check=False)
        assert init.returncode == 0, init.stderr
        worker, controller = procs.worker(env), procs.controller(env)
        await worker.wait_ready(within=90)
        await controller.wait_ready(within=90)
        failed, retried = in_partition_0("perm-rb-"), in_partition_0("once-rb-")
        for rid in (failed, retried):
            await anyio.run_process([*CLI, "start", rid, "user-9"], cwd=REPO, env=env)
        redis = connect(server.url)
        keys = Keys("saga", PARTITIONS)

        async def ended() -> bool:
            return await states(redis, keys, [failed, retried]) == ["failed", "completed"]

        await wait_until(ended, within=60, what="the seed sagas to end", on_timeout=procs.tails)
        await redis.aclose()
        problems: list[str] = []
        for heading, code in runbooks():
            if "saga() {" not in code:
                problems += await anyio.to_thread.run_sync(run_block, heading, code, env, failed)
        assert controller.alive() and worker.alive()
    finally:
        procs.kill_all()
        server.stop()
    assert problems == []


def run_block(heading: str, code: str, env: dict[str, Any], record: str) -> list[str]:
    """Run one block with the README's own R and part helpers; return what went wrong."""
    helpers = [ln for ln in conventions().splitlines() if ln.startswith(("R()", "part()"))]
    prelude = [
        "NS=saga; REL=saga",
        *helpers,
        f'saga() {{ {shlex.quote(sys.executable)} -m saga.cli.main "$@"; rc=$?; '
        '[ $rc -le 1 ] || echo "saga exited $rc: saga $*"; }',
    ]
    body = without_cluster_commands(code).replace("<record_id>", record)
    result = subprocess.run(
        ["bash", "-c", "\n".join([*prelude, body])],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    found = [m.group(0) for m in REFUSED.finditer(output)]
    found += re.findall(r"saga exited \d+: .*", output)
    return [f"{heading}: {f}\n{output[-2000:]}" for f in found]
