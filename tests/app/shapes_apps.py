"""Saga types with wait steps for the shapes tests: ``saga worker
tests.app.shapes_apps:reviews`` (draft -> wait for 'approved' -> publish -> sleep ->
archive). ``REVIEW_TIMEOUT`` (seconds) bounds the wait; then the default approval goes
on. The sleep wakes at the draft's ``wake_at`` (epoch seconds). ``DRAFT_AFTER`` (seconds)
makes the draft's commit run the wait step that long after it (ctx.run_next_after)."""

from __future__ import annotations

import os

import msgspec

import saga


class Doc(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    wake_at: float = 0.0


class Draft(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    wake_at: float = 0.0


class Published(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    by: str
    wake_at: float = 0.0


class Archived(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    by: str


reviews = saga.App("reviews")


@reviews.step(calls_models=False)
async def draft(ctx: saga.StepContext, doc: Doc) -> Draft:
    if os.environ.get("DRAFT_AFTER"):
        ctx.run_next_after(float(os.environ["DRAFT_AFTER"]))
    return Draft(title=doc.title, wake_at=doc.wake_at)


@reviews.wait(
    event="approved",
    after=draft,
    timeout=float(os.environ.get("REVIEW_TIMEOUT", "3600")),
    on_timeout="default",
    default={"by": "nobody"},
)
class Approval(msgspec.Struct, frozen=True, kw_only=True):
    by: str
    title: str = ""


@reviews.step(after=Approval, calls_models=False)
async def publish(ctx: saga.StepContext, a: Approval) -> Published:
    return Published(title=a.title, by=a.by, wake_at=float(os.environ.get("WAKE_AT", "0")))


nap = reviews.sleep("nap", after=publish, until="wake_at")


@reviews.step(after=nap, calls_models=False)
async def archive(ctx: saga.StepContext, p: Published) -> Archived:
    return Archived(title=p.title, by=p.by)
