"""A saga type with schedules, as a user's module declares them
(``SAGA_PIPELINE=tests.schedules.apps:labs saga controller``)."""

from __future__ import annotations

import msgspec

import saga


class Panel(msgspec.Struct, frozen=True, kw_only=True):
    panel: str


class Scored(msgspec.Struct, frozen=True, kw_only=True):
    panel: str
    score: float


labs = saga.App("labs")


@labs.step()
async def score(ctx: saga.StepContext, p: Panel) -> Scored:
    return Scored(panel=p.panel, score=1.0)


@labs.schedule(cron="0 2 * * *", user="lab-ops")
def nightly_rerun() -> Panel:
    return Panel(panel="cbc")


@labs.schedule(cron="*/15 * * * *", name="quarter")
def every_quarter() -> None:
    return None
