"""Saga types with a map for the map tests: ``saga worker tests.app.map_apps:pages``
(split -> parse, one attempt per chunk, at most 3 at once -> merge). ``PARSE_FAILS``:
a comma-separated list of chunk numbers whose parse fails for good; ``PARSE_FLAKY``:
chunks whose first attempt fails (a retry then commits); ``MAP_GATE`` (a path): each
item waits until that file exists, so the test can see items in flight.
``partial`` is the same saga type with ``on_failure="partial"``."""

from __future__ import annotations

import os

import anyio
import msgspec

import saga


class Doc(msgspec.Struct, frozen=True, kw_only=True):
    pages: int
    per_chunk: int = 2


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    first: int
    last: int


class Parsed(msgspec.Struct, frozen=True, kw_only=True):
    first: int
    pages: list[int]


class Report(msgspec.Struct, frozen=True, kw_only=True):
    pages: list[int]
    chunks: int
    partial: bool = False
    failed: list[int] = []


def _numbers(name: str) -> set[int]:
    return {int(x) for x in os.environ.get(name, "").split(",") if x.strip()}


async def _gate() -> None:
    gate = os.environ.get("MAP_GATE", "")
    for _ in range(1200):  # held until the test opens the gate (a file), at most 60 s
        if not gate or await anyio.Path(gate).exists():
            return
        await anyio.sleep(0.05)


async def split_doc(ctx: saga.StepContext, d: Doc) -> list[Chunk]:
    return [
        Chunk(first=p, last=min(p + d.per_chunk, d.pages) - 1)
        for p in range(0, d.pages, d.per_chunk)
    ]


async def parse_chunk(ctx: saga.StepContext, c: Chunk) -> Parsed:
    await _gate()
    n = c.first
    if n in _numbers("PARSE_FAILS"):
        raise saga.PermanentError(f"chunk {n} cannot be parsed")
    if n in _numbers("PARSE_FLAKY") and ctx.attempt == 1:
        raise saga.RetryableError(f"chunk {n}: the parser timed out once")
    return Parsed(first=c.first, pages=list(range(c.first, c.last + 1)))


pages = saga.App("pages")
pages.step(name="split", calls_models=False)(split_doc)
pages.map(name="parse", over="split", concurrency=3, backoff=0.2)(parse_chunk)


@pages.step(after="parse", calls_models=False)
async def merge(ctx: saga.StepContext, parsed: list[Parsed]) -> Report:
    return Report(pages=[p for x in parsed for p in x.pages], chunks=len(parsed))


partial = saga.App("partial")
partial.step(name="split", calls_models=False)(split_doc)
partial.map(name="parse", over="split", concurrency=2, on_failure="partial", backoff=0.2)(
    parse_chunk
)


@partial.step(after="parse", calls_models=False)
async def merge_partial(ctx: saga.StepContext, parsed: saga.MapResults[Parsed]) -> Report:
    got = [x for x in parsed.results if x is not None]
    return Report(pages=[p for x in got for p in x.pages], chunks=len(parsed.results),
                  partial=parsed.partial, failed=parsed.failed)  # fmt: skip
