"""A saga type with branches for the shapes tests: ``saga worker
tests.app.branch_apps:claims`` (intake -> {fraud, coverage} in parallel -> decide ->
notify). ``FRAUD_FAILS`` ("dead"): fraud fails for good, and the saga is compensated
when coverage committed (its hold is released). ``FRAUD_DELAY`` / ``COVERAGE_DELAY``
(seconds): the branch sleeps that long first; ``BRANCH_GATE`` (a path): each branch
then waits until that file exists, so both are in flight until the test lets them go."""

from __future__ import annotations

import os

import anyio
import msgspec

import saga


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    amount: int


class Intake(msgspec.Struct, frozen=True, kw_only=True):
    amount: int


class Fraud(msgspec.Struct, frozen=True, kw_only=True):
    score: float


class Coverage(msgspec.Struct, frozen=True, kw_only=True):
    covered: int
    hold: str


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The join's input: a field per parent, each the parent's output."""

    fraud: Fraud
    coverage: Coverage


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    pay: int


claims = saga.App("claims")


async def _pause(step: str) -> None:
    await anyio.sleep(float(os.environ.get(f"{step.upper()}_DELAY", "0")))
    gate = os.environ.get("BRANCH_GATE", "")
    for _ in range(1200):  # held until the test opens the gate (a file), at most 60 s
        if not gate or await anyio.Path(gate).exists():
            return
        await anyio.sleep(0.05)


@claims.step(calls_models=False)
async def intake(ctx: saga.StepContext, c: Claim) -> Intake:
    return Intake(amount=c.amount)


async def release_hold(ctx: saga.StepContext, inp: Intake, out: Coverage, key: str) -> None:
    """Undoes coverage (its hold) — nothing outside to call in the test."""


@claims.step(after=intake, calls_models=False)
async def fraud(ctx: saga.StepContext, i: Intake) -> Fraud:
    await _pause("fraud")
    if os.environ.get("FRAUD_FAILS") == "dead":
        raise saga.PermanentError("fraud check refused the claim")
    return Fraud(score=0.1 if i.amount < 1000 else 0.9)


@claims.step(after=intake, calls_models=False, compensate=release_hold)
async def coverage(ctx: saga.StepContext, i: Intake) -> Coverage:
    await _pause("coverage")
    return Coverage(covered=min(i.amount, 500), hold=f"hold-{ctx.record_id}")


@claims.step(after=[fraud, coverage], calls_models=False)
async def decide(ctx: saga.StepContext, v: Verdict) -> Decision:
    return Decision(pay=0 if v.fraud.score > 0.5 else v.coverage.covered)


@claims.step(after=decide, calls_models=False)
async def notify(ctx: saga.StepContext, d: Decision) -> Decision:
    return d
