"""The fault suite's pipeline: router → parser → grouper whose steps append a line to an
independent run log before they return, so at-least-once execution is counted without
trusting saga's own history.

Selected in worker processes with ``SAGA_PIPELINE=tests.faults.runlog:pipeline``; the
log directory comes from ``SAGA_FAULT_RUNLOG`` (one file per worker process, so
appends from several processes never interleave). The record id chooses a behaviour at
the router, as in ``tests.executor.pipelines`` (slow-, perm-, retry-, once-, llm-, ...).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saga.api.pipeline import Pipeline, StepSpec
from saga.api.retry import RetryPolicy
from tests.executor import pipelines

STEPS = pipelines.STEPS
Doc = pipelines.Doc


def _log_file() -> Path | None:
    folder = os.environ.get("SAGA_FAULT_RUNLOG", "")
    return Path(folder) / f"{os.getpid()}.log" if folder else None


async def step_fn(ctx: Any, inp: Doc) -> Doc:
    """Append 'begin', behave as the record id says (at the router), append 'end'."""
    _append(ctx, "begin")
    if ctx.step == pipelines.BEHAVIOUR_STEP:
        await pipelines._behave(ctx)
    _append(ctx, "end")
    return Doc(document=inp.document, trail=[*inp.trail, ctx.step])


def _append(ctx: Any, what: str) -> None:
    path = _log_file()
    if path is not None:
        # One write of one short line on an O_APPEND file: whole, even if killed after.
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{ctx.step} {ctx.record_id} {ctx.epoch} {ctx.attempt} {what}\n")


def spec(name: str) -> StepSpec:
    return StepSpec(
        name=name,
        fn=step_fn,
        input_type=Doc,
        output_type=Doc,
        timeout_s=30.0,
        lease_s=30.0,
        concurrency=8,
        retry=RetryPolicy(max_attempts=5, base_s=pipelines.BACKOFF_BASE_S, jitter=0.0),
    )


def pipeline() -> Pipeline:
    return Pipeline(tuple(spec(name) for name in STEPS))


@dataclass(frozen=True)
class RunLog:
    """Every step execution the workers reported, read back from the log folder."""

    runs: Counter[tuple[str, str, int]]
    """(step, record, epoch) -> executions begun."""
    ended: Counter[tuple[str, str, int]]
    """(step, record, epoch) -> executions that returned."""

    @classmethod
    def read(cls, folder: Path) -> RunLog:
        runs: Counter[tuple[str, str, int]] = Counter()
        ended: Counter[tuple[str, str, int]] = Counter()
        for path in folder.glob("*.log"):
            for line in path.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) == 5:  # a line cut by a kill is not counted
                    key = (parts[0], parts[1], int(parts[2]))
                    (runs if parts[4] == "begin" else ended)[key] += 1
        return cls(runs, ended)
