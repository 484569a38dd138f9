"""A saga type with durable timers for the timer tests: ``saga worker
tests.app.timer_apps:timed`` (plan -> [run the next step at the plan's time] -> remind ->
sleep_until(remind's time + SNOOZE s) -> done). ``Job.at`` (epoch s) is used when set,
else ``Job.delay`` seconds after plan's commit (ctx.run_next_after)."""

from __future__ import annotations

import os
import time

import msgspec

import saga


class Job(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    delay: float = 1.0
    at: float = 0.0


class Planned(msgspec.Struct, frozen=True, kw_only=True):
    name: str


class Reminded(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    ran_at: float


timed = saga.App("timed")


@timed.step(calls_models=False)
async def plan(ctx: saga.StepContext, job: Job) -> Planned:
    if job.at:
        ctx.run_next_at(job.at)
    else:
        ctx.run_next_after(job.delay)
    return Planned(name=job.name)


@timed.step(after=plan, calls_models=False)
async def remind(ctx: saga.StepContext, p: Planned) -> Reminded:
    return Reminded(name=p.name, ran_at=time.time())


def _wake(r: Reminded) -> float:
    return r.ran_at + float(os.environ.get("SNOOZE", "1"))


snooze = timed.sleep_until("snooze", after=remind, at=_wake)


@timed.step(after=snooze, calls_models=False)
async def done(ctx: saga.StepContext, r: Reminded) -> Reminded:
    return r
