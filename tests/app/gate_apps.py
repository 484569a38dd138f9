"""A saga type with a review gate for the gate's fault test: ``saga worker
tests.app.gate_apps:letters`` (check -> review gate -> send). ``check`` flags a letter
whose text says "urgent" for review; the gate holds it until its review is accepted."""

from __future__ import annotations

import msgspec

import saga


class Letter(msgspec.Struct, frozen=True, kw_only=True):
    text: str


class Checked(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    review: str = ""


letters = saga.App("letters")


@letters.step(calls_models=False)
async def check(ctx: saga.StepContext, letter: Letter) -> Checked:
    return Checked(text=letter.text, review="it says urgent" if "urgent" in letter.text else "")


gate = letters.review_gate("review", after=check)


@letters.step(after=gate, calls_models=False)
async def send(ctx: saga.StepContext, c: Checked) -> Letter:
    return Letter(text=c.text)  # not Checked: its review field would flag the saga again
