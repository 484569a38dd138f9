"""An app whose second step cannot read the first one's output (for the loading tests)."""

from __future__ import annotations

import msgspec

import saga


class Ticket(msgspec.Struct):
    id: str


class Seat(msgspec.Struct):
    row: int


app = saga.App("tickets")


@app.step()
async def book(ctx: saga.StepContext, ticket: Ticket) -> Ticket:
    return ticket


@app.step(after=book)
async def seat(ctx: saga.StepContext, seat: Seat) -> Seat:
    return seat
