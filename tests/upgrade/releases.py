"""Releases of one saga type, as a user's module would ship them: ``v2`` adds the
step ``check`` between ``take`` and ``ship`` (``saga worker tests.upgrade.releases:v1``),
``v3`` raises ``take``'s version, ``v4`` changes ``ship``'s input type incompatibly.
Each step appends its release and name to the trail, so a test sees who ran what."""

from __future__ import annotations

import msgspec

import saga


class Box(msgspec.Struct, frozen=True, kw_only=True):
    item: str
    trail: list[str] = []


def marked(box: Box, mark: str) -> Box:
    """The box passed on, with who handled it appended to its trail."""
    return Box(item=box.item, trail=[*box.trail, mark])


v1 = saga.App("parcels")


@v1.step(name="take")
async def take_v1(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, "v1/take")


@v1.step(name="ship", after="take")
async def ship_v1(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, "v1/ship")


v2 = saga.App("parcels")


@v2.step(name="take")
async def take_v2(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, "v2/take")


@v2.step(name="check", after="take")
async def check_v2(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, "v2/check")


@v2.step(name="ship", after="check")
async def ship_v2(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, "v2/ship")


# v3: take's code at version 2 (its commits record it); check reads the version that
# produced its input and says which shape it was given.
v3 = saga.App("parcels")


@v3.step(name="take", version=2)
async def take_v3(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, f"v3/take@{ctx.step_version}")


@v3.step(name="check", after="take")
async def check_v3(ctx: saga.StepContext, box: Box) -> Box:
    # The patching branch: an input of take v1 (an older release) is read as it was.
    return marked(box, f"v3/check(input v{ctx.input_version})")


@v3.step(name="ship", after="check")
async def ship_v3(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, "v3/ship")


# v4: check and ship move to a Label that requires a field Box never had: a Box that an
# older release's check stored cannot be decoded as ship's input.
class Label(msgspec.Struct, frozen=True, kw_only=True):
    item: str
    address: str
    trail: list[str] = []


v4 = saga.App("parcels")


@v4.step(name="take")
async def take_v4(ctx: saga.StepContext, box: Box) -> Box:
    return marked(box, "v4/take")


@v4.step(name="check", after="take")
async def check_v4(ctx: saga.StepContext, box: Box) -> Label:
    return Label(item=box.item, address="here", trail=[*box.trail, "v4/check"])


@v4.step(name="ship", after="check")
async def ship_v4(ctx: saga.StepContext, label: Label) -> Label:
    return Label(item=label.item, address=label.address, trail=[*label.trail, "v4/ship"])
