"""Two releases of one saga type, as a user's module would ship them: ``v2`` adds the
step ``check`` between ``take`` and ``ship`` (``saga worker tests.upgrade.releases:v1``).
Each step appends its release and name to the trail, so a test sees who ran what."""

from __future__ import annotations

import msgspec

import saga


class Box(msgspec.Struct, frozen=True, kw_only=True):
    item: str
    trail: list[str] = []


v1 = saga.App("parcels")


@v1.step(name="take")
async def take_v1(ctx: saga.StepContext, box: Box) -> Box:
    return Box(item=box.item, trail=[*box.trail, "v1/take"])


@v1.step(name="ship", after="take")
async def ship_v1(ctx: saga.StepContext, box: Box) -> Box:
    return Box(item=box.item, trail=[*box.trail, "v1/ship"])


v2 = saga.App("parcels")


@v2.step(name="take")
async def take_v2(ctx: saga.StepContext, box: Box) -> Box:
    return Box(item=box.item, trail=[*box.trail, "v2/take"])


@v2.step(name="check", after="take")
async def check_v2(ctx: saga.StepContext, box: Box) -> Box:
    return Box(item=box.item, trail=[*box.trail, "v2/check"])


@v2.step(name="ship", after="check")
async def ship_v2(ctx: saga.StepContext, box: Box) -> Box:
    return Box(item=box.item, trail=[*box.trail, "v2/ship"])
