"""The review queue: sagas waiting for a person's review, oldest first, with their
reasons, counts per kind of reason, filterable by user and saga type. The page and
``GET /api/v1/review-queue`` show the same document."""

from __future__ import annotations

import re
import time

import msgspec

from saga.console.service import Service
from saga.state.replies import text
from saga.state.review_queue import oldest_waiting

READ = 500
"""At most this many of each partition's oldest entries are read (bounded)."""
KINDS = (
    ("rejected", "rejected by"),
    ("coverage", "coverage "),
    ("no unit", "without a unit"),
    ("unverified", "unverified"),
    ("nothing extracted", "nothing was extracted"),
    ("pages without text", "had no text"),
    ("OCR", "OCR"),
)
"""Kind of reason -> the words of the parser's review sentence that say it."""


class QueueRow(msgspec.Struct, kw_only=True):
    record_id: str
    user_id: str
    saga_type: str
    flagged_ms: int
    waiting_s: int
    reason: str
    """``<step>: <the step's sentence>`` of every flagged step, joined by " | "."""
    kinds: list[str]


class ReviewQueue(msgspec.Struct, kw_only=True):
    """``GET /api/v1/review-queue``."""

    saga_type: str
    user: str
    rows: list[QueueRow]
    counts: dict[str, int]
    """Kind of reason -> how many of the rows have it."""
    total: int
    """Sagas waiting for review in the type (all users; ``rows`` may be fewer)."""
    oldest_waiting_s: int


def kinds_of(reason: str) -> list[str]:
    found = [kind for kind, words in KINDS if words in reason]
    return found or (["other"] if reason else [])


async def queue(
    svc: Service, user: str | None, saga_type: str | None, limit: int = 200
) -> ReviewQueue:
    from saga.console.review_service import steps_of
    from saga.state.review_queue import backlog

    keys = await svc.typed(saga_type)
    steps = await steps_of(svc, keys)
    waiting = await oldest_waiting(svc.redis, keys, READ)
    pipe = svc.redis.pipeline(transaction=False)
    for w in waiting:
        pipe.hmget(keys.saga(w.record_id), ["uid", *[f"rv:{s}" for s in steps]])
    replies = await pipe.execute() if waiting else []
    now_ms = int(time.time() * 1000)
    rows: list[QueueRow] = []
    counts: dict[str, int] = {}
    for w, got in zip(waiting, replies, strict=True):
        uid = text(got[0])
        if not uid or (user and uid != user):
            continue
        reason = " | ".join(f"{s}: {text(r)}" for s, r in zip(steps, got[1:], strict=True) if r)
        kinds = kinds_of(reason)
        for k in kinds:
            counts[k] = counts.get(k, 0) + 1
        if len(rows) < limit:
            rows.append(QueueRow(record_id=w.record_id, user_id=uid, saga_type=keys.saga_type,
                                 flagged_ms=w.flagged_ms,
                                 waiting_s=max(now_ms - w.flagged_ms, 0) // 1000,
                                 reason=reason, kinds=kinds))  # fmt: skip
    b = await backlog(svc.redis, keys)
    return ReviewQueue(
        saga_type=keys.saga_type, user=user or "", rows=rows, counts=counts, total=b.count,
        oldest_waiting_s=max(now_ms - b.oldest_ms, 0) // 1000 if b.oldest_ms else 0,
    )  # fmt: skip


def age_text(seconds: int) -> str:
    """3d 4h, 5h 12m, 7m, 40s."""
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    return f"{m}m" if m else f"{s}s"


_SLUG = re.compile(r"[^a-z0-9]+")


def slug(kind: str) -> str:
    return _SLUG.sub("-", kind.lower()).strip("-")
