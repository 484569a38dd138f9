"""Accepting a saga's review and saying what followed: the CLI's and the console's
``review accept`` answer (``shapes.ReviewAccepted``). At a review gate the acceptance
moves the saga on in the same script; the answer names the step it went to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from saga.cli.shapes import ReviewAccepted

if TYPE_CHECKING:
    from saga.api.client import SagaClient


async def accept_and_report(sagas: SagaClient, record_id: str, actor: str) -> ReviewAccepted:
    gate = (await sagas.get(record_id)).wait_review
    cleared = await sagas.accept_review(record_id, actor=actor)
    moved = (await sagas.get(record_id)).step if gate else ""
    return ReviewAccepted(
        record_id=record_id, accepted=True, flags_cleared=cleared, moved_on_to=moved
    )
