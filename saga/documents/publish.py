"""The document pipeline's optional fourth step, ``publish`` (``SAGA_RESULTS_URL``):
POST the grouped results to the results endpoint under the step's idempotency key;
its compensation retracts them (DELETE).

Published results stay correct across re-runs: when ``saga retry --step parser`` makes
the saga run again, publish (in the new epoch, so under a new key) first retracts what
the earlier epoch published (its receipt is the step's previous output), then posts.
A compensation retracts the publication its receipt names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec

from saga.adapters.results import ResultsEndpoint
from saga.api.app_types import accepts
from saga.api.app_waits import gate_spec, parked, wait_step
from saga.api.pipeline import AppError, Pipeline, StepSpec
from saga.api.retry import RetryPolicy
from saga.steps.models import GrouperOutput

NAME = "publish"
GATE = "review"
"""The review gate before publish (SAGA_REVIEW_BEFORE_PUBLISH)."""


class Published(msgspec.Struct, frozen=True, kw_only=True):
    """The receipt publish commits: under which key the results went out."""

    key: str
    status: int
    group_count: int


class PublishedResults(msgspec.Struct, frozen=True, kw_only=True):
    """The body POSTed to ``SAGA_RESULTS_URL``."""

    record_id: str
    user_id: str
    group_count: int
    groups: list[Any]


def publish_spec(endpoint: ResultsEndpoint) -> StepSpec:
    async def publish(ctx: Any, grouped: GrouperOutput) -> Published:
        if ctx.previous_output:  # an earlier epoch published: retract it first
            old = msgspec.json.decode(ctx.previous_output, type=Published)
            if old.key != ctx.idempotency_key:
                await endpoint.retract(ctx.record_id, old.key)
        body = PublishedResults(
            record_id=ctx.record_id,
            user_id=ctx.user_id,
            group_count=grouped.group_count,
            groups=list(grouped.groups),
        )
        status = await endpoint.publish(ctx.idempotency_key, msgspec.json.encode(body))
        return Published(key=ctx.idempotency_key, status=status, group_count=grouped.group_count)

    async def unpublish(ctx: Any, grouped: GrouperOutput, out: Published, key: str) -> None:
        await endpoint.retract(ctx.record_id, out.key)

    return StepSpec(
        name=NAME,
        fn=publish,
        input_type=GrouperOutput,
        output_type=Published,
        retry=RetryPolicy(max_attempts=5),
        timeout_s=60.0,
        lease_s=60.0,
        concurrency=8,
        compensate=unpublish,
        previous_output=True,
    )


def with_publish(pipeline: Pipeline, url: str, gate: bool = False) -> Pipeline:
    """``pipeline`` with publish as its last step, taking the grouper's output; with
    ``gate`` (SAGA_REVIEW_BEFORE_PUBLISH), behind the review gate ``review``, which passes
    an unflagged saga at once and holds a flagged one for a person's review."""
    last = pipeline.steps[-1]
    if (why := accepts(GrouperOutput, last.output_type)) is not None:
        raise AppError(f"SAGA_RESULTS_URL: publish cannot take the output of {last.name!r}: {why}")
    steps = [*pipeline.steps]
    if gate:
        spec = wait_step(GATE, parked, gate_spec(f"review gate {GATE!r}", timeout=None,
                                                 on_timeout="fail"))  # fmt: skip
        steps.append(replace(spec, output_type=last.output_type))
    steps.append(publish_spec(ResultsEndpoint(url)))
    return replace(pipeline, steps=tuple(steps))
