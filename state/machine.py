"""The Python face of the Lua transitions: one typed async method per script.

Every call carries an operation id and is re-sent with the same id when the
connection drops mid-call (the script answers a repeat from its record), which
is why the client's own blind retries are off (see ``connection.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec

from saga.state.backoff import resend
from saga.state.codes import RC, raise_for, to_code
from saga.state.days import utc_day
from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id, validate_step
from saga.state.keys import GROUP, Keys
from saga.state.limits import StateLimits
from saga.state.map_calls import MapPlan, item_call
from saga.state.model import Claim, SagaState, is_undo, undo_of
from saga.state.op_ids import new_op
from saga.state.replies import ClaimOutcome, claim_outcome, num, text
from saga.state.requests import CommitRequest, FailRequest, Outcome, StartResult
from saga.state.scripts import evalsha, evalsha_many
from saga.state.step_calls import add_commit, commit_batch, fail_call
from saga.state.undo_calls import UndoClaim, claim_undo, commit_undo_call

T = TypeVar("T")
__all__ = ["StateMachine", "new_op"]  # new_op: callers import it from here
_Call = tuple[str, list[str], list[Any]]

_COMMITS_PER_CALL = 64
"""Attempts per commit_steps call (the script's cap), which bounds how long one call holds
the server."""


class StateMachine:
    """Runs the executor-side transitions of one keyspace against one client.

    Operator transitions (retry, cancel) live in ``saga.state.operator``;
    recovery and quarantine in ``saga.state.recovery``.
    """

    def __init__(self, client: Any, keys: Keys, limits: StateLimits | None = None) -> None:
        self.client = client
        self.keys = keys
        self.limits = limits or StateLimits()
        self.user_caps: dict[str, tuple[int, int]] = {}
        self.maps: dict[str, MapPlan] = {}  # map steps (state/map_calls), set by executors
        """Step -> (per-user cap, lease ms) for the steps this process runs with a cap
        (``SAGA_USER_MAX_INFLIGHT``): their commits and fails hand the slot on."""

    async def _resend(self, call: Callable[[], Awaitable[T]]) -> T:
        """Re-send a transition on connection loss; the op id makes a repeat harmless."""
        return await resend(call, attempts=5)

    async def _durable(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """One script; with ``commit_replicas`` or ``commit_fsync`` its WAIT (WAITAOF)
        rides in the same round trip."""
        durable = self.limits.durable
        if not durable:
            return await evalsha(self.client, name, keys, args)
        reply = (await evalsha_many(self.client, [(name, keys, args)], **durable))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def _state_indexes(self, partition: int) -> list[str]:
        return self.keys.state_indexes(partition)

    # -- start ------------------------------------------------------------
    async def start(
        self,
        record_id: str,
        user_id: str,
        first_step: str,
        *,
        input_json: bytes = b"{}",
        document: str = "",
        trace: str = "",
        op: str | None = None,
        priority: int = 0,
    ) -> StartResult:
        """``priority`` 0-9: above 0, claims of the first step set priority-0 entries
        aside for it (``includes/lowered.lua``)."""
        if not 0 <= priority <= 9:
            raise InvalidIdError(f"priority must be 0-9, not {priority}")
        validate_id(record_id, "record_id")
        validate_id(user_id, "user_id")
        validate_step(first_step)
        k, p = self.keys, self.keys.partition_of(record_id)
        keys = [
            k.saga(record_id),
            k.history(record_id),
            k.ready(p, first_step),
            k.created_index(p),
            k.user_index(p, user_id),
            *self._state_indexes(p),
            k.urgent(p, first_step),
        ]
        args: list[Any] = [record_id, user_id, first_step, k.seal(input_json)]
        args += [k.seal(document.encode()) if document else "", trace]
        args += [op or new_op(), self.limits.history_maxlen, priority]
        reply = await self._resend(lambda: self._durable("start_saga", keys, args))
        code = to_code(reply[0])
        raise_for(code, record_id, f"owned by {text(reply[1])}" if len(reply) > 1 else "")
        return StartResult(
            code == RC.OK, SagaState(text(reply[1])), text(reply[2]), num(reply[3]), num(reply[4])
        )

    # -- claim --------------------------------------------------------------
    async def claim(
        self,
        step: str,
        partition: int,
        entries: Sequence[tuple[str, str]],
        *,
        worker: str,
        lease_ms: int,
        max_lease_expiries: int,
        load_pages: bool = False,
        extra_fields: tuple[str, ...] = (),
        prev_step: str = "",
        user_cap: int = 0,
        undoable: Sequence[str] = (),
        op: str | None = None,
    ) -> list[ClaimOutcome]:
        """Claim (entry id, record id) pairs of one partition's ready stream, ≤100 per call.

        ``prev_step`` (the step before, "_input" for the first): its output is read
        with the saga's state in one command; a saga whose last step differs costs one more.
        ``user_cap``: attempts of the step one user may hold at once in the partition; an
        entry over it comes back DEFERRED (set aside until a slot of its user frees).
        ``undoable``: the pipeline's steps with a compensation, latest first: a saga
        dead-lettered by its lease expiries enters compensation in the same script."""
        if not entries:
            return []
        if is_undo(step):
            undo = UndoClaim(worker, lease_ms, max_lease_expiries, prev_step, op or new_op())
            return await self._resend(lambda: claim_undo(self, step, partition, entries, undo))
        k = self.keys
        keys, args = self.claim_call(
            step, partition, worker=worker, lease_ms=lease_ms,
            max_lease_expiries=max_lease_expiries, load_pages=load_pages,
            extra_fields=extra_fields, prev_step=prev_step, user_cap=user_cap,
            undoable=undoable, op=op or new_op(),
        )  # fmt: skip
        for entry_id, record_id in entries:
            rk = k.record(record_id)
            keys += [rk.saga, rk.history, rk.pages]
            args += [entry_id, record_id]
        replies = await self._resend(lambda: evalsha(self.client, "claim_steps", keys, args))
        unseal = k.unseal if k.sealer is not None else None
        return [claim_outcome(r, step, extra_fields, unseal) for r in replies]

    def claim_call(
        self,
        step: str,
        partition: int,
        *,
        worker: str,
        lease_ms: int,
        max_lease_expiries: int,
        load_pages: bool,
        extra_fields: tuple[str, ...],
        prev_step: str,
        user_cap: int,
        undoable: Sequence[str],
        op: str,
    ) -> tuple[list[str], list[Any]]:
        """claim_steps' keys and arguments up to its entries (``claim`` adds pairs,
        ``claim_read.claim_read`` asks the script to read them)."""
        k = self.keys
        keys = [
            k.ready(partition, step),
            k.quarantine(partition),
            k.dead(partition, step),
            k.stats(partition),
            *self._state_indexes(partition),
            k.inflight(partition, step),
            k.deferred(partition, step),
            k.retired(partition),
            k.urgent(partition, step),
            k.lowered(partition, step),
        ]
        args: list[Any] = [GROUP, step, worker, lease_ms, op]
        args += [self.limits.history_maxlen, "1" if load_pages else "0", max_lease_expiries]
        args += [prev_step, user_cap, len(extra_fields), *extra_fields, len(undoable[:32])]
        if undoable:
            keys += [k.ready(partition, undo_of(s)) for s in undoable[:32]]
            args += undoable[:32]
        args += [self.limits.retention.arg(), self.limits.priority_boost_ms]
        return keys, args

    async def release_lowered(self, step: str, partition: int, most: int = 1000) -> int:
        """Lowered entries of ``step`` back into its stream (all when no urgent saga waits,
        else those past the age bound); returns how many. The promote loops call it."""
        if self.limits.priority_boost_ms <= 0 or is_undo(step):
            return 0
        k = self.keys
        keys = [k.ready(partition, step), k.urgent(partition, step), k.lowered(partition, step)]
        reply = await evalsha(self.client, "release_lowered", keys,
                              [self.limits.priority_boost_ms, most])  # fmt: skip
        return num(reply[1])

    # -- heartbeat ----------------------------------------------------------
    async def heartbeat(
        self, claim: Claim, *, worker: str, lease_ms: int, op: str | None = None
    ) -> int:
        """Extend the lease; returns the new deadline (ms). Raises LeaseLostError if fenced."""
        p = self.keys.partition_of(claim.record_id)
        keys = [self.keys.saga(claim.record_id), self.keys.ready(p, claim.step)]
        keys.append(self.keys.inflight(p, claim.step))
        args = [claim.token, lease_ms, GROUP, worker, claim.entry_id, op or new_op()]
        capped = claim.step in self.user_caps
        args.append(f"{claim.user_id}|{claim.record_id}" if capped else "")
        args.append(claim.step)  # a lane's lease is its own (lua/includes/lanes)
        reply = await self._resend(lambda: evalsha(self.client, "extend_lease", keys, args))
        code = to_code(reply[0])
        raise_for(code, claim.record_id)
        return num(reply[1])

    # -- commit and fail ----------------------------------------------------
    async def commit(self, claim: Claim, req: CommitRequest) -> Outcome:
        """Commit one attempt. LEASE_LOST comes back as a code, not an exception."""
        req = req if req.op else msgspec.structs.replace(req, op=new_op())
        return (await self.finish_many([(claim, req)]))[0]

    async def fail(self, claim: Claim, req: FailRequest) -> Outcome:
        req = req if req.op else msgspec.structs.replace(req, op=new_op())
        return (await self.finish_many([(claim, req)]))[0]

    async def finish_many(
        self,
        items: Sequence[tuple[Claim, CommitRequest | FailRequest]],
        *,
        attempts: int | None = 5,
        on_retry: Callable[[BaseException], Any] | None = None,
    ) -> list[Outcome]:
        """Commit or fail several attempts in one write (one round trip).

        The commits of one partition share one commit_steps call (up to 64 a call),
        inside which each attempt is committed atomically, in full, before the next;
        a fail, and a commit of an undo step, is a script call of its own.
        Operation ids are fixed before the first send, so every re-send after a
        connection loss (``attempts`` in all, None: until it gets through) is answered
        from the first's record, never taken for a new call."""
        calls: list[_Call] = []
        # Per item: its call, and its place in that call's replies (-1: the call's own).
        where: list[tuple[int, int]] = []
        batches: dict[int, int] = {}  # partition -> its commit_steps call with room left
        day = utc_day()
        for claim, given in items:
            req = given if given.op else msgspec.structs.replace(given, op=new_op())
            if isinstance(req, CommitRequest) and not is_undo(claim.step) and claim.item < 0:
                rk = self.keys.record(claim.record_id)
                at = batches.get(rk.partition)
                if at is None or calls[at][2][5] >= _COMMITS_PER_CALL:
                    at = batches[rk.partition] = len(calls)
                    calls.append(commit_batch(self, rk.partition, day))
                where.append((at, calls[at][2][5]))
                add_commit(self, calls[at], rk, claim, req)
                continue
            where.append((len(calls), -1))
            if claim.item >= 0:  # a map's item (state/map_calls)
                calls.append(item_call(self, claim, req, req.op))
            elif isinstance(req, CommitRequest):
                calls.append(commit_undo_call(self, claim, req, req.op))
            else:
                calls.append(fail_call(self, claim, req))
        durable = self.limits.durable  # {} for local: the call is as it was without it
        replies = await resend(
            lambda: evalsha_many(self.client, calls, **durable), attempts, on_retry
        )
        out = []
        for at, pos in where:
            reply = replies[at]
            if isinstance(reply, Exception):
                raise reply
            if pos >= 0:
                reply = reply[pos]
            code = to_code(reply[0])
            state = text(reply[1]) if len(reply) > 1 else ""
            detail = text(reply[2]) if len(reply) > 2 else ""
            out.append(Outcome(code, state, detail))
        return out

    # -- the per-user cap ------------------------------------------------------
    async def release_deferred(
        self, step: str, partition: int, *, cap: int, lease_ms: int, most: int, idle: bool
    ) -> int:
        """Send entries deferred by the per-user cap back to the ready stream: as many as
        their users' free slots allow, or up to ``most`` regardless of it when ``idle``."""
        k = self.keys
        keys = [k.deferred(partition, step), k.inflight(partition, step), k.ready(partition, step)]
        args = [cap, lease_ms, min(most, 1000), "1" if idle else "0", 1000]
        reply = await self._resend(lambda: evalsha(self.client, "release_deferred", keys, args))
        return num(reply[1])

    # -- retries ------------------------------------------------------------
    async def due_candidates(self, step: str, partition: int, limit: int) -> list[tuple[str, int]]:
        """The earliest delayed retries of a step (record id, due ms), due or not."""
        rows = await self.client.zrange(
            self.keys.delayed(partition, step), 0, limit - 1, withscores=True
        )
        return [(text(member), int(score)) for member, score in rows]

    async def promote(
        self, step: str, partition: int, records: Sequence[str], op: str | None = None
    ) -> tuple[int, int]:
        """Promote due retries among ``records``; returns (promoted, not yet due)."""
        if not records:
            return 0, 0
        k = self.keys
        keys = [k.delayed(partition, step), k.ready(partition, step)]
        keys += self._state_indexes(partition)
        for rid in records:
            keys += [k.saga(rid), k.history(rid)]
        args = [step, op or new_op(), self.limits.history_maxlen, *records]
        reply = await self._resend(lambda: evalsha(self.client, "promote_retries", keys, args))
        return num(reply[1]), num(reply[2])


def _day() -> str:
    """Today's UTC date (the cost totals' key)."""
    return utc_day()[0]
