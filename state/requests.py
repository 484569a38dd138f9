"""What the executor hands the state machine and gets back: the typed arguments
and results of the start, commit and fail transitions."""

from __future__ import annotations

import msgspec

from saga.state.codes import RC
from saga.state.model import FailAction, SagaState


class StartResult(msgspec.Struct, frozen=True):
    created: bool
    state: SagaState
    step: str
    epoch: int
    created_ms: int


class CommitRequest(msgspec.Struct, frozen=True, kw_only=True):
    output: bytes
    next_step: str = ""
    worker: str = ""
    pages: bytes | None = None
    delete_pages: bool = False
    checkpoint: bytes | None = None
    cost: float = 0.0
    """Cost not covered by ``cost_keys`` (USD)."""
    tokens: int = 0
    cost_keys: tuple[str, ...] = ()
    """Cached LLM answers the attempt used; the script attributes each one's cost once."""
    review: str = ""
    """Why the output needs a person's look (``""``: none); flags the saga for review."""
    op: str = ""
    step_version: int = 1
    """The version of the step's code that produced the output (``StepSpec.version``)."""
    run_at_ms: int = 0
    """Run the next step no earlier than this (epoch ms; 0: at once). A plain next step
    only: the saga waits as a timer in its partition's waits (``ctx.run_next_at``)."""
    run_after_ms: int = 0
    """Run the next step this long after the commit, by the server's clock (used when
    > 0; ``ctx.run_next_after``)."""

    def not_before_arg(self) -> str:
        """commit_steps' "not before" argument (lua/includes/next_at)."""
        if self.run_after_ms > 0:
            return f"+{self.run_after_ms}"
        return str(self.run_at_ms) if self.run_at_ms > 0 else "0"


class FailRequest(msgspec.Struct, frozen=True, kw_only=True):
    action: FailAction
    error_class: str
    error_message: str
    """Shown to everyone: never a path, URL or content (``saga.steps.errors``)."""
    delay_ms: int = 0
    worker: str = ""
    cost: float = 0.0
    tokens: int = 0
    cost_keys: tuple[str, ...] = ()
    error_detail: str = ""
    """For operators only: sealed into the stored error with a data key, else dropped."""
    undo: tuple[str, ...] = ()
    """With action dead: the pipeline's steps that have a compensation, latest first. If
    one of them committed, the saga enters compensating instead of failed."""
    op: str = ""
    step_version: int = 1
    """The version of the step's code that failed (``StepSpec.version``)."""


class Outcome(msgspec.Struct, frozen=True):
    """The code of a commit/fail and what it led to."""

    code: RC
    state: str = ""
    detail: str = ""
    """Next step (commit), due ms or dead-letter id (fail)."""
