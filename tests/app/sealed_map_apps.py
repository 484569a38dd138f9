"""A saga type with a map whose data must be sealed (``saga worker
tests.app.sealed_map_apps:notes``): split -> tag (a map over the note's lines, an item
failed for good with ``TAG_FAILS``, on_failure="partial"; each committed item undone by
``untag``, which notes what it got in ``UNDO_LOG``) -> merge (fails for good with
``MERGE_FAILS``). Every value holds the marker ``SECRET``."""

from __future__ import annotations

import os

import anyio
import msgspec

import saga

SECRET = "ZQXMAP5521"


class Note(msgspec.Struct, frozen=True):
    lines: list[str]


class Line(msgspec.Struct, frozen=True):
    text: str


class Tagged(msgspec.Struct, frozen=True):
    text: str


class Summary(msgspec.Struct, frozen=True):
    texts: list[str]
    failed: list[int]


notes = saga.App("notes")


@notes.step(calls_models=False)
async def split(ctx: saga.StepContext, n: Note) -> list[Line]:
    return [Line(text=f"{x} {SECRET}") for x in n.lines]


async def untag(ctx: saga.StepContext, line: Line, tagged: Tagged, key: str) -> None:
    async with await anyio.open_file(os.environ["UNDO_LOG"], "a") as f:
        await f.write(f"{key} {line.text} -> {tagged.text}\n")


@notes.map(over=split, concurrency=2, on_failure="partial", compensate=untag)
async def tag(ctx: saga.StepContext, line: Line) -> Tagged:
    if line.text.startswith(os.environ.get("TAG_FAILS") or "\x00"):
        raise saga.PermanentError("this line cannot be tagged")
    return Tagged(text=f"tagged {line.text}")


@notes.step(after=tag, calls_models=False)
async def merge(ctx: saga.StepContext, got: saga.MapResults[Tagged]) -> Summary:
    if os.environ.get("MERGE_FAILS"):
        raise saga.PermanentError("the summary cannot be stored")
    return Summary(texts=[t.text for t in got.results if t is not None], failed=got.failed)
