"""Saga types with a map for the map tests: ``saga worker tests.app.map_apps:pages``
(split -> parse, one attempt per chunk, at most 3 at once -> merge). ``PARSE_FAILS``:
a comma-separated list of chunk numbers whose parse fails for good; ``PARSE_FLAKY``:
chunks whose first attempt fails (a retry then commits); ``MAP_GATE`` (a path): each
item waits until that file exists, so the test can see items in flight.
``partial`` is the same saga type with ``on_failure="partial"``; ``undone`` gives split a
compensation (a failed item then undoes it); ``itemundo`` gives parse one too (each
committed item undone on its own, ``UNDO_LOG``), and its merge fails with ``MERGE_FAILS``."""

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


async def unsplit(ctx: saga.StepContext, d: Doc, chunks: list[Chunk], key: str) -> None:
    """split's compensation: notes its key in the file ``UNDO_LOG`` (one line a run)."""
    async with await anyio.open_file(os.environ["UNDO_LOG"], "a") as f:
        await f.write(f"{key} {len(chunks)}\n")


undone = saga.App("undone")
undone.step(name="split", calls_models=False, compensate=unsplit)(split_doc)
undone.map(name="parse", over="split", concurrency=2)(parse_chunk)


@undone.step(after="parse", calls_models=False)
async def merge_undone(ctx: saga.StepContext, parsed: list[Parsed]) -> Report:
    return Report(pages=[p for x in parsed for p in x.pages], chunks=len(parsed))


async def unparse(ctx: saga.StepContext, c: Chunk, parsed: Parsed, key: str) -> None:
    """parse's compensation, once per committed item: its key, chunk and pages."""
    async with await anyio.open_file(os.environ["UNDO_LOG"], "a") as f:
        await f.write(f"{key} {c.first} {parsed.pages}\n")


itemundo = saga.App("itemundo")  # each item undone on its own; MERGE_FAILS: merge fails
itemundo.step(name="split", calls_models=False, compensate=unsplit)(split_doc)
itemundo.map(name="parse", over="split", concurrency=2, compensate=unparse)(parse_chunk)


@itemundo.step(after="parse", calls_models=False)
async def merge_or_fail(ctx: saga.StepContext, parsed: list[Parsed]) -> Report:
    if os.environ.get("MERGE_FAILS"):
        raise saga.PermanentError("the report cannot be merged")
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


# -- trips: every shape in one saga type (the fault suite's) ----------------------
# plan -> book (a map over the legs) -> priced -> {hotel, car} in parallel -> confirm
# (their join) -> approved (a wait, default on timeout) -> ticket -> nap (a sleep) ->
# done. ``LEG_DELAY`` (seconds): each leg's booking sleeps that long first.


class Trip(msgspec.Struct, frozen=True, kw_only=True):
    legs: int


class Leg(msgspec.Struct, frozen=True, kw_only=True):
    n: int


class Booked(msgspec.Struct, frozen=True, kw_only=True):
    n: int
    ref: str


class Priced(msgspec.Struct, frozen=True, kw_only=True):
    refs: list[str]


class Hotel(msgspec.Struct, frozen=True, kw_only=True):
    nights: int


class Car(msgspec.Struct, frozen=True, kw_only=True):
    days: int


class Both(msgspec.Struct, frozen=True, kw_only=True):
    hotel: Hotel
    car: Car


class Confirmed(msgspec.Struct, frozen=True, kw_only=True):
    refs: list[str]
    nights: int


class Approval(msgspec.Struct, frozen=True, kw_only=True):
    by: str


class Ticket(msgspec.Struct, frozen=True, kw_only=True):
    by: str


trips = saga.App("trips")


@trips.step(calls_models=False)
async def plan(ctx: saga.StepContext, t: Trip) -> list[Leg]:
    return [Leg(n=i) for i in range(t.legs)]


@trips.map(over=plan, concurrency=3)
async def book(ctx: saga.StepContext, leg: Leg) -> Booked:
    await anyio.sleep(float(os.environ.get("LEG_DELAY", "0")))
    return Booked(n=leg.n, ref=f"{ctx.record_id}-{leg.n}")


@trips.step(after=book, calls_models=False)
async def priced(ctx: saga.StepContext, legs: list[Booked]) -> Priced:
    return Priced(refs=[b.ref for b in legs])


@trips.step(after=priced, calls_models=False)
async def hotel(ctx: saga.StepContext, p: Priced) -> Hotel:
    return Hotel(nights=len(p.refs))


@trips.step(after=priced, calls_models=False)
async def car(ctx: saga.StepContext, p: Priced) -> Car:
    return Car(days=len(p.refs) + 1)


@trips.step(after=[hotel, car], calls_models=False)
async def confirm(ctx: saga.StepContext, both: Both) -> Confirmed:
    return Confirmed(refs=[], nights=both.hotel.nights)


trips.wait(event="approved", after=confirm, timeout=float(os.environ.get("TRIP_TIMEOUT", "3600")),
           on_timeout="default", default={"by": "nobody"})(Approval)  # fmt: skip


@trips.step(after="approved", calls_models=False)
async def ticket(ctx: saga.StepContext, a: Approval) -> Ticket:
    return Ticket(by=a.by)


trips.sleep("nap", after=ticket, seconds=0.5)


@trips.step(after="nap", calls_models=False)
async def done(ctx: saga.StepContext, t: Ticket) -> Ticket:
    return t
