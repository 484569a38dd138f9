"""Sagas driven to an end in this process through the state machine (no worker): a mix
of completed, flagged-for-review, dead-lettered, cancelled and still-active sagas, with
pages and cached LLM answers, to move between partition counts and compare."""

from __future__ import annotations

from typing import Any

from saga.state import operator
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, FailAction
from saga.state.requests import CommitRequest, FailRequest
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups

STEPS = ("router", "parser", "grouper")


async def claim_all(sm: StateMachine, client: Any, step: str) -> dict[str, Claim]:
    keys, got = sm.keys, {}
    for p in keys.all_partitions():
        reply = await client.xreadgroup(GROUP, "w", {keys.ready(p, step): ">"}, count=100)
        pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
        for out in await sm.claim(
            step, p, pairs, worker="w", lease_ms=60_000, max_lease_expiries=3
        ):
            if out.claim is not None:
                got[out.claim.record_id] = out.claim
    return got


async def mixed_sagas(client: Any, keys: Keys, n: int) -> dict[str, str]:
    """``n`` sagas per kind; returns record id -> kind. Kinds: done, review (completed,
    flagged), dead (failed at the router, with a dead letter), cancelled, active
    (pending at the parser, with its pages), cached (completed, with an answer cached)."""
    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    sm = StateMachine(client, keys)
    kinds = ["done", "review", "dead", "cancelled", "active", "cached"]
    rids = {f"{k}-{i:03d}": k for k in kinds for i in range(n)}
    for rid in rids:
        await sm.start(rid, f"user-{hash(rid) % 3}", "router")
    for rid, kind in rids.items():
        if kind == "cancelled":
            await operator.cancel(sm, rid)
    for step, nxt in (("router", "parser"), ("parser", "grouper"), ("grouper", "")):
        claims = await claim_all(sm, client, step)
        batch: list[tuple[Claim, CommitRequest | FailRequest]] = []
        for rid, c in claims.items():
            kind = rids[rid]
            if kind == "dead":
                batch.append((c, FailRequest(action=FailAction.DEAD, error_class="E",
                                             error_message="unreadable", worker="w")))  # fmt: skip
            elif kind == "active" and step == "parser":
                continue  # stays running at the parser
            else:
                cost_keys: tuple[str, ...] = ()
                if kind == "cached" and step == "parser":
                    cost_keys = (keys.llm_cache(rid, "parser", "e1-abc"),)
                    await client.set(cost_keys[0], b'{"cost": 0.02}', ex=3600)
                review = "check units" if kind == "review" and step == "parser" else ""
                pages = b"page text" if step == "router" else None
                batch.append((c, CommitRequest(output=b'{"ok": 1}', next_step=nxt, worker="w",
                                               review=review, pages=pages,
                                               cost_keys=cost_keys)))  # fmt: skip
        await sm.finish_many(batch)
    return rids
