"""Test pipelines for executor tests, selected in worker processes by ``SAGA_PIPELINE``.

``pipeline`` is router → parser → grouper with no-op steps that append their name to
a trail. At the router, the record id chooses a behaviour (no step talks to Redis):

    slow-<s>-…      sleeps <s> seconds, then succeeds
    perm-…          raises InvalidInputError (permanent: dead letter at once)
    retry-…         raises RuntimeError on every attempt (retryable)
    once-…          raises RuntimeError on attempt 1, succeeds after
    hang-…          sleeps an hour (past any test timeout)
    hangonce-…      sleeps an hour on attempt 1, succeeds after
    llm-<s>-…       asks the user's LLM (ctx.llm) one question, then sleeps <s> seconds

Any other id passes straight through. Retries back off from 0.05 s (0.1 s, 0.2 s, …)
so retry tests take tenths of a second; ``SAGA_<STEP>_*`` still override the rest.

``enricher_registration`` is what a separate package would publish under the
``saga.steps`` entry-point group: an ``enricher`` after the document parser.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from saga.api.pipeline import Pipeline, StepRegistration, StepSpec
from saga.api.retry import RetryPolicy
from saga.steps.errors import InvalidInputError
from saga.steps.models import Biomarker, Extraction, ParserOutput

STEPS = ("router", "parser", "grouper")
BEHAVIOUR_STEP = "router"
BACKOFF_BASE_S = 0.05
ENRICHER_MARKER = "Enricher Check"


class Doc(msgspec.Struct, frozen=True, kw_only=True):
    """Input and output of every test step: the document reference and the steps run."""

    document: str = ""
    trail: list[str] = []


def slow_seconds(record_id: str) -> float:
    """``slow-0.25-x`` → 0.25."""
    return float(record_id.split("-")[1])


async def _behave(ctx: Any) -> None:
    rid, attempt = ctx.record_id, ctx.attempt
    if rid.startswith("slow-"):
        await anyio.sleep(slow_seconds(rid))
    elif rid.startswith("llm-"):
        await ctx.llm.complete([{"role": "user", "content": f"hello {rid}"}], purpose="test")
        await anyio.sleep(slow_seconds(rid))
    elif rid.startswith("perm-"):
        raise InvalidInputError(f"record {rid} can never be processed (attempt {attempt})")
    elif rid.startswith("retry-"):
        raise RuntimeError(f"transient failure on attempt {attempt}")
    elif rid.startswith("once-") and attempt == 1:
        raise RuntimeError("first attempt fails")
    elif rid.startswith("hang-") or (rid.startswith("hangonce-") and attempt == 1):
        await anyio.sleep_forever()


async def step_fn(ctx: Any, inp: Doc) -> Doc:
    if ctx.step == BEHAVIOUR_STEP:
        await _behave(ctx)
    return Doc(document=inp.document, trail=[*inp.trail, ctx.step])


def spec(name: str, **changes: Any) -> StepSpec:
    fields: dict[str, Any] = {
        "timeout_s": 30.0,
        "lease_s": 30.0,
        "concurrency": 8,
        "retry": RetryPolicy(max_attempts=5, base_s=BACKOFF_BASE_S, jitter=0.0),
    }
    fields.update(changes)
    return StepSpec(name=name, fn=step_fn, input_type=Doc, output_type=Doc, **fields)


def pipeline() -> Pipeline:
    """router → parser → grouper, no-op but for the router's record-id behaviours."""
    return Pipeline(tuple(spec(name) for name in STEPS))


# -- the enricher, contributed through an entry point ----------------------------------
async def enrich(ctx: Any, inp: ParserOutput) -> ParserOutput:
    """Add one marker biomarker, so the grouper's output shows the enricher ran."""
    marker = Biomarker(name=ENRICHER_MARKER, value=1.0, value_text="1", unit="")
    extraction = Extraction(
        biomarkers=[*inp.extraction.biomarkers, marker],
        diagnoses=inp.extraction.diagnoses,
        procedures=inp.extraction.procedures,
        genetics=inp.extraction.genetics,
    )
    return ParserOutput.of(extraction)


enricher_registration = StepRegistration(
    spec=StepSpec(
        name="enricher",
        fn=enrich,
        input_type=ParserOutput,
        output_type=ParserOutput,
        timeout_s=30.0,
        lease_s=30.0,
    ),
    after="parser",
)
