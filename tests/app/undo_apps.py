"""Two saga types with compensations for the compensation tests, sharing step names
(``flight``, ``hotel``): ``saga worker tests.app.undo_apps:trips``.

Every effect, and every undo, is a file in ``UNDO_LEDGER`` named by its kind and the
idempotency key it was done under, created once (O_EXCL: an external system that
deduplicates on the key); ``attempts.log`` records every execution (at-least-once).
The trip's fields steer the run: which step fails for good, how often the hotel's undo
fails before it succeeds (-1: for good), and whether its first undo, or its first payment,
hangs (to be killed).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import msgspec

import saga


class Trip(msgspec.Struct, frozen=True, kw_only=True):
    who: str
    fail_at: str = ""
    undo_fails: int = 0
    hang_undo: bool = False
    hang_pay: bool = False


class Booked(msgspec.Struct, frozen=True, kw_only=True):
    trip: Trip
    what: list[str]


def ledger() -> Path:
    return Path(os.environ["UNDO_LEDGER"])


def effect(kind: str, key: str) -> None:
    """Do ``kind`` once per key, however often it runs; log every run."""
    with open(ledger() / "attempts.log", "a") as log:
        log.write(f"{kind} {key}\n")
    try:
        fd = os.open(ledger() / f"{kind}@{key}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, str(time.time_ns()).encode())
    os.close(fd)


def done(kind: str) -> dict[str, int]:
    """Effects of ``kind`` done: key -> when (ns)."""
    out = {}
    for path in ledger().glob(f"{kind}@*"):
        out[path.name.split("@", 1)[1]] = int(path.read_text() or 0)
    return out


def runs(kind: str) -> list[str]:
    path = ledger() / "attempts.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.split(" ", 1)[1] for line in lines if line.split(" ", 1)[0] == kind]


def _app(name: str) -> saga.App:
    app = saga.App(name)

    async def cancel_flight(ctx: saga.StepContext, trip: Trip, out: Booked, key: str) -> None:
        effect(f"{name}-cancel-flight", key)

    async def cancel_hotel(ctx: saga.StepContext, inp: Booked, out: Booked, key: str) -> None:
        trip = out.trip
        if trip.hang_undo and not (ledger() / f"hung@{ctx.record_id}").exists():
            (ledger() / f"hung@{ctx.record_id}").touch()
            await asyncio.Event().wait()  # hangs until the test kills the worker
        if trip.undo_fails < 0:
            raise saga.PermanentError("the hotel refuses to cancel")
        if ctx.attempt <= trip.undo_fails:
            raise saga.RetryableError(f"hotel busy (attempt {ctx.attempt})")
        effect(f"{name}-cancel-hotel", key)

    @app.step(compensate=cancel_flight, backoff=0.05)
    async def flight(ctx: saga.StepContext, trip: Trip) -> Booked:
        effect(f"{name}-book-flight", ctx.idempotency_key)
        return Booked(trip=trip, what=["flight"])

    @app.step(after=flight, compensate=cancel_hotel, backoff=0.05, retries=3)
    async def hotel(ctx: saga.StepContext, b: Booked) -> Booked:
        effect(f"{name}-book-hotel", ctx.idempotency_key)
        return Booked(trip=b.trip, what=[*b.what, "hotel"])

    @app.step(after=hotel, backoff=0.05)
    async def pay(ctx: saga.StepContext, b: Booked) -> Booked:
        if b.trip.hang_pay and not (ledger() / f"paying@{ctx.record_id}").exists():
            (ledger() / f"paying@{ctx.record_id}").touch()
            await asyncio.Event().wait()  # hangs until the test kills the worker
        if b.trip.fail_at == "pay":
            raise saga.PermanentError("card declined")
        return Booked(trip=b.trip, what=[*b.what, "paid"])

    return app


trips = _app("trips")
tours = _app("tours")
