"""The README's tutorial runs as written: its ``trip.py`` and its shell lines, taken
from README.md itself (so the two cannot drift), against the embedded server in an
empty directory, with the clone's virtualenv on the PATH. The tutorial shows every
shape in one saga (a branch and its join, a map, a wait, a kill -9 takeover and a
compensation), so its cap is under 55 lines of code (it was 40 for the chain alone)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_shell(
    script: str, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in bash in a session of its own, and kill that session at the end:
    a worker the script left running (or one a timeout cut short) must not outlive the
    test, holding the pipe open and the default health port for the tests after it."""
    proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def tutorial() -> tuple[str, str]:
    """The tutorial's Python file and shell script, as the README shows them."""
    section = (REPO / "README.md").read_text().split("## Tutorial:", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(# trip\.py\n.*?)```", section, re.S)
    shell = re.search(r"```sh\n(.*?)```", section, re.S)
    assert code and shell, "the README's tutorial lost a code block"
    return code.group(1), shell.group(1)


def test_the_tutorial_is_short() -> None:
    """Under 55 lines of code (blank lines aside), Python and shell together."""
    code, shell = tutorial()
    lines = [line for line in (code + shell).splitlines() if line.strip()]
    assert len(lines) < 55, len(lines)


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    """The worker is killed mid-hotel (the car, its parallel branch, commits); another
    takes over; the join runs, the map books a seat per traveller, each item once, the
    wait consumes the approval sent early (kept, then signalled once), pay fails with the
    approval's data; each seat, then the flight, is undone under its own key, once; show
    draws the lost attempt, the branches with their parents, the map's rows, the wait
    and an undo row per seat and for the flight. No attempt crashes on the way."""
    code, shell = tutorial()
    (tmp_path / "trip.py").write_text(code)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SAGA_") and k not in ("REDIS_URL", "PYTHONPATH")}  # fmt: skip
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        SAGA_DATA_DIR=str(tmp_path / "data"),
        PYTHONUNBUFFERED="1",
        NO_COLOR="1",
    )
    # `saga start --wait` exits 1 (the saga did not complete): the exit code is not checked
    res = run_shell(shell, tmp_path, env, timeout=240)
    out = res.stdout
    assert "cancelled flight LH-123 of alice (booked under t-1:flight:e1)" in out, res.stderr
    assert out.count("cancelled flight") == 1
    for seat in ("3A of bob (booked under t-1:seat:1:e1)",
                 "5A of alice (booked under t-1:seat:0:e1)"):  # fmt: skip
        assert out.count(f"freed seat {seat}") == 1, out[-3000:]
        assert out.index(f"freed seat {seat}") < out.index("cancelled flight")  # latest first
    assert out.count("freed seat") == 2
    assert "kept until the saga reaches its wait" in out, out[-3000:]
    assert '"attempt_crashed"' not in res.stderr and "Traceback" not in res.stderr
    show = out[out.index("record   t-1") :]
    for expected in ("compensated", "lease expired", "undo:flight",
                     "card declined (approved by carol)", "|| car <- flight",
                     "travellers <- hotel, car", "seat <- travellers", "2 items",
                     "fanned_in", "2 items, 0 failed", "signal_kept", "approved <- seat",
                     "pay <- approved"):  # fmt: skip
        assert expected in show, (expected, show[-3000:])
    rows = [line.split()[0] for line in show.splitlines() if line.strip()]
    for row in ("seat[0]", "seat[1]", "undo:seat[0]", "undo:seat[1]", "undo:flight"):
        assert rows.count(row) == 1, (row, show[-3000:])
    assert sum(" signalled " in line for line in show.splitlines()) == 1, show[-3000:]


WORKER_CUE = "start a worker in a second shell"
"""The README's sentence after which its examples have a worker running."""
NOT_RUN = "<!-- not part of the session -->"
"""Marks a block drawn from elsewhere (a report the parser was unsure of)."""


def commands_session() -> list[tuple[bool, str, int]]:
    """The Commands section's shell lines in order: (a worker runs by then, the
    command, the exit code the README shows after it with `echo $?`, else 0)."""
    section = (REPO / "README.md").read_text().split("## Commands", 1)[1]
    section = section.split("\n## ", 1)[0]
    out: list[tuple[bool, str, int]] = []
    worker = False
    for prose, block in re.findall(r"(.*?)```\n(.*?)```", section, re.S):
        worker = worker or WORKER_CUE in prose
        if NOT_RUN in prose.rsplit("\n\n", 1)[-1]:
            continue
        lines = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
        for cmd in lines:
            if cmd == "echo $?":
                continue
            out.append((worker, cmd, 0))
        for i, line in enumerate(block.splitlines()):
            if line == "$ echo $?":
                want = int(block.splitlines()[i + 1])
                prev = [c for c in block.splitlines()[:i] if c.startswith("$ ")][-1][2:]
                idx = max(j for j, (_, c, _) in enumerate(out) if c == prev)
                out[idx] = (out[idx][0], prev, want)
    return out


def test_every_record_the_commands_name_is_created_first() -> None:
    """A newcomer running the examples in order never meets a record that no earlier
    example started (but `nope`, shown failing on purpose)."""
    started: set[str] = set()
    for _, cmd, _code in commands_session():
        words = cmd.split()
        if words[:2] == ["saga", "start"]:
            started.add(words[2])
        for name in re.findall(r"\bmr-[\w-]+", cmd):
            assert name in started, f"{cmd!r} names {name}, which no earlier example starts"


def test_the_commands_run_as_written(tmp_path: Path) -> None:
    """From the clone's directory, after the quick start's demo: each example exits as
    shown (0 unless an `echo $?` follows it), a worker started where the README says."""
    session = commands_session()
    script = ["set +e", "saga demo >/dev/null 2>&1 || echo '@@ demo failed'"]
    worker_on = False
    for i, (worker, cmd, _) in enumerate(session):
        if worker and not worker_on:
            script.append(f"saga worker router parser grouper >{tmp_path}/worker.log 2>&1 &")
            worker_on = True
        script += [f"echo '@@ {i}'", cmd, 'echo "@@ rc $?"']  # a comment ends at its line
    script += ["kill %1 2>/dev/null; wait", "saga server stop >/dev/null"]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SAGA_") and k not in ("REDIS_URL", "PYTHONPATH")}  # fmt: skip
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        SAGA_DATA_DIR=str(tmp_path / "data"),
        SAGA_HEALTH_PORT="0",
        NO_COLOR="1",
    )
    res = run_shell("\n".join(script), REPO, env, timeout=400)
    (tmp_path / "session.out").write_text(res.stdout)
    assert "@@ demo failed" not in res.stdout
    codes = [int(c) for c in re.findall(r"^@@ rc (\d+)$", res.stdout, re.M)]
    assert len(codes) == len(session), res.stdout[-3000:] + res.stderr[-3000:]
    wrong = [(cmd, want, got) for (_, cmd, want), got in zip(session, codes, strict=True)
             if want != got]  # fmt: skip
    assert not wrong, (wrong, res.stdout[-4000:], res.stderr[-2000:])
