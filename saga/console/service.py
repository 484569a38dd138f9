"""What the console reads and does, shared by the JSON API and the pages.

Reads go through the same ``state/`` queries as the CLI and come back in the
shapes of its ``--json`` (``saga list``, ``show``, ``top``, ``dlq``, ``costs``),
built by the CLI's own functions. A viewer's copy of a saga has no document name
and no outputs. Every action runs through ``SagaClient`` (so through the state
machine's scripts) with the person as the actor recorded in history, and is
written to the audit log: who, what, which record, how it ended.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import structlog

from saga.api.client import SagaClient
from saga.api.pipeline import Pipeline
from saga.cli import shapes
from saga.cli.cmd_top import Sample
from saga.config.settings import Settings
from saga.console.auth import Identity
from saga.console.errors import ConsoleError
from saga.console.tokens import Role
from saga.state.ids import validate_step
from saga.state.keys import Keys
from saga.state.listing import ListQuery, SagaPage, list_page
from saga.state.model import SagaState
from saga.state.queries import StateCounts, registered_steps, state_counts

audit = structlog.get_logger("saga.console.audit")
RATE_WINDOW_S = 60.0
"""Throughput is measured against the previous sample if it is at most this old."""


class Service:
    def __init__(self, redis: Any, keys: Keys, settings: Settings, pipeline: Pipeline) -> None:
        self.redis, self.keys, self.settings, self.pipeline = redis, keys, settings, pipeline
        self.sagas = SagaClient(redis, keys, pipeline, settings)
        self._last: Sample | None = None

    # -- reads ----------------------------------------------------------------------
    async def typed(self, saga_type: str | None) -> Keys:
        """The keys of ``saga_type`` (the list filter ``type``; default: the console's own
        type), which must be registered (as ``--type`` on the CLI)."""
        from saga.state.types import type_info, type_names

        if not saga_type or saga_type == self.keys.saga_type:
            return self.keys
        if await type_info(self.redis, self.keys, saga_type) is None:
            known = ", ".join(await type_names(self.redis, self.keys)) or "none yet"
            raise ConsoleError(
                f"no saga type {saga_type!r} is registered (registered: {known}); "
                "a worker or client of the type registers it"
            )
        return self.keys.of_type(saga_type)

    async def client_of(self, saga_type: str | None) -> SagaClient:
        """The client of a registered type (its steps and compensations from the registry
        of types, as the CLI's ``--type``); the console's own type by default."""
        from saga.state.types import type_info

        keys = await self.typed(saga_type)
        if keys == self.keys:
            return self.sagas
        info = await type_info(self.redis, self.keys, keys.saga_type)
        assert info is not None  # typed() refused an unregistered type
        return SagaClient(self.redis, keys, info, self.settings)

    async def type_names(self) -> list[str]:
        """Every registered saga type, the console's own included (the filter's choices)."""
        from saga.state.types import type_names

        return sorted({self.keys.saga_type, *await type_names(self.redis, self.keys)})

    async def page(self, q: ListQuery, saga_type: str | None = None) -> SagaPage:
        return await list_page(self.redis, await self.typed(saga_type), q)

    async def search(self, text: str, saga_type: str | None = None) -> tuple[bool, Any]:
        """A record id: (True, None) when a saga of that id exists; else (False, the
        sagas whose id starts with ``text``, newest created first)."""
        from saga.state.search import find_prefix

        keys = await self.typed(saga_type)
        if await self.redis.exists(keys.saga(text)):
            return True, None
        return False, await find_prefix(self.redis, keys, text)

    async def counts(self, saga_type: str | None = None) -> StateCounts:
        return await state_counts(self.redis, await self.typed(saga_type))

    async def saga(self, record_id: str, who: Identity, saga_type: str | None = None) -> Any:
        """``saga show --json`` (``--output --json`` for an operator)."""
        from saga.cli.cmd_show import document
        from saga.state.reads import get_saga_and_history

        keys = await self.typed(saga_type)
        saga, events = await get_saga_and_history(self.redis, keys, record_id)
        operator = who.role == Role.OPERATOR
        doc = document(saga, events, _now_ms(), outputs=operator)
        if not operator:  # a document's name or path can identify a patient
            doc.saga.document = ""
            doc.saga.error_detail = ""
        return doc

    async def queues(self) -> Any:
        """``saga top --once --json`` of every registered saga type (as ``saga top``
        without ``--type``); throughput against the previous call's sample."""
        from saga.cli.cmd_top import document, sample
        from saga.state.types import type_names

        names = sorted({self.keys.saga_type, *await type_names(self.redis, self.keys)})
        cur = await sample(self.redis, [self.keys.of_type(t) for t in names])
        prev = self._last if self._last and cur.at - self._last.at <= RATE_WINDOW_S else None
        self._last = cur
        return document(cur, prev)

    async def steps(self, step: str | None, saga_type: str | None = None) -> list[str]:
        """Every registered step (of ``saga_type``), or ``step`` if it is one."""
        known = await registered_steps(self.redis, await self.typed(saga_type))
        if not step:
            return known
        if validate_step(step) not in known:
            raise ConsoleError(f"unknown step {step!r}; the steps are {', '.join(known)}")
        return [step]

    async def dead_letters(self, step: str | None, limit: int) -> Any:
        """``saga dlq list --json``."""
        from saga.state.dead_letters import dead_letters

        found = await dead_letters(self.redis, self.keys, await self.steps(step), limit)
        return shapes.DeadLettersDocument(dead_letters=found)

    async def costs(self, user: str | None, since_ms: int) -> Any:
        """``saga costs --json``."""
        from saga.cli.cmd_costs import document
        from saga.state.queries import cost_totals

        days = _days(since_ms)
        return document(await cost_totals(self.redis, self.keys, days, user), days)

    async def costs_daily(self, user: str | None, since_ms: int) -> dict[str, Any]:
        """The rows of ``saga costs`` per UTC day, and each day's total (the chart)."""
        from saga.state.queries import cost_by_day

        days = _days(since_ms)
        by_day = await cost_by_day(self.redis, self.keys, days, user)
        return {"from": days[0], "to": days[-1], "days": [
            {"day": d, "usd": round(sum(r.usd for r in rows), 9), "rows": rows}
            for d, rows in by_day.items()
        ]}  # fmt: skip

    # -- actions --------------------------------------------------------------------
    async def retry(
        self, who: Identity, record_id: str, step: str | None, force: bool,
        saga_type: str | None = None,
    ) -> Any:  # fmt: skip
        """``saga retry <record> --step S [--type T] --json``."""
        sagas = await self.client_of(saga_type)
        names = sagas.type_info.steps
        if step and step not in names:
            raise ConsoleError(f"unknown step {step!r}; the pipeline has {', '.join(names)}")
        with _audited(who, "retry", record_id, step=step or "", force=force,
                      saga_type=sagas.keys.saga_type):  # fmt: skip
            res = await sagas.retry(record_id, step=step, force=force, actor=who.actor)
        return shapes.RetryResult(record_id=record_id, step=res.step, epoch=res.epoch,
                                  duplicate=res.duplicate)  # fmt: skip

    async def cancel(self, who: Identity, record_id: str, saga_type: str | None = None) -> Any:
        """``saga cancel <record> [--type T] --json``."""
        sagas = await self.client_of(saga_type)
        with _audited(who, "cancel", record_id, saga_type=sagas.keys.saga_type):
            previous = await sagas.cancel(record_id, actor=who.actor)
        return shapes.CancelResult(record_id=record_id, previous_state=SagaState(previous),
                                   state=SagaState.CANCELLED)  # fmt: skip

    async def compensate(self, who: Identity, record_id: str, saga_type: str | None = None) -> Any:
        """``saga cancel <record> --compensate --json``: stop the saga and undo its
        committed steps, latest first (the first undo is enqueued here)."""
        sagas = await self.client_of(saga_type)
        if not sagas.type_info.undoable:
            raise ConsoleError(
                f"no step of {sagas.keys.saga_type} has a compensation; cancel instead"
            )
        with _audited(who, "compensate", record_id, saga_type=sagas.keys.saga_type):
            previous = (await sagas.get(record_id)).state
            res = await sagas.compensate(record_id, actor=who.actor)
        first = res.step if res.state == SagaState.COMPENSATING else ""
        return shapes.CancelResult(record_id=record_id, previous_state=previous,
                                   state=SagaState(res.state), first_undo=first)  # fmt: skip

    def undoable(self) -> tuple[str, ...]:
        """The steps of the console's type that have a compensation, latest first."""
        return tuple(self.sagas.type_info.undoable)

    @staticmethod
    def undo_plan(undoable: tuple[str, ...], outputs: dict[str, str]) -> list[str]:
        """What a compensation would undo now: the steps with a compensation whose output
        is stored, latest first (the plan ``compensate_saga.lua`` fixes)."""
        return [step for step in undoable if step in outputs]

    async def accept_review(
        self, who: Identity, record_id: str, note: str, saga_type: str | None = None
    ) -> Any:
        """``saga review accept <record> --json``; the note is kept in history."""
        sagas = await self.client_of(saga_type)
        actor = (who.actor + (f": {note}" if note else ""))[:500]
        from saga.cli.review_accept import accept_and_report

        with _audited(who, "accept_review", record_id, saga_type=sagas.keys.saga_type):
            return await accept_and_report(sagas, record_id, actor)

    async def replay(
        self, who: Identity, step: str | None, record_ids: list[str] | None, dry_run: bool,
        limit: int,
    ) -> Any:  # fmt: skip
        """``saga dlq replay --json``: each live dead letter's saga re-runs from its step;
        ``record_ids`` picks some of them (the ones a person selected)."""
        from saga.state.dead_letters import dead_letters, split_live
        from saga.state.errors import StateError

        letters = await dead_letters(
            self.redis, self.keys, await self.steps(step), limit, oldest_first=True
        )
        if record_ids is not None:
            chosen = set(record_ids)
            letters = [d for d in letters if d.record_id in chosen]
        live, stale = await split_live(self.redis, self.keys, letters)
        skipped = [shapes.SkippedLetter(record_id=d.record_id, step=d.step, reason="stale")
                   for d in stale]  # fmt: skip
        done: list[Any] = []
        errors: list[Any] = []
        for d in live:
            if not dry_run:
                try:
                    with _audited(who, "replay", d.record_id, step=d.step):
                        await self.sagas.retry(d.record_id, step=d.step, actor=who.actor)
                except (StateError, KeyError) as exc:
                    errors.append(shapes.StepError(record_id=d.record_id, step=d.step,
                                                   error=str(exc)))  # fmt: skip
                    continue
            done.append(shapes.RecordStep(record_id=d.record_id, step=d.step))
        return shapes.ReplayDocument(dry_run=dry_run, replayed=done, skipped=skipped,
                                     errors=errors)  # fmt: skip

    async def purge(self, who: Identity, step: str | None) -> Any:
        """``saga dlq purge --yes --json``: the dead letters go, the sagas stay failed."""
        from saga.state.dead_letters import purge_dead_letters

        steps = await self.steps(step)
        with _audited(who, "purge_dead_letters", "", steps=",".join(steps)):
            count = await purge_dead_letters(self.redis, self.keys, steps)
        return shapes.PurgeDocument(purged=count, steps=steps)

    # -- budgets (the user's, shared by every saga type) ----------------------------
    async def budgets(self, user: str | None = None) -> Any:
        """``saga budget show --json`` (every budgeted user, or ``user`` budgeted or not),
        with each user's budget-parked sagas per type (a bounded read of the indexes)."""
        from saga.console.budgets import BudgetsView
        from saga.state import budgets

        rows = await budgets.statuses(self.redis, self.keys, user)
        parked = await budgets.parked_counts(self.redis, self.keys)
        listed = {r.user_id for r in rows}
        mine = {u: n for u, n in parked.by_user.items() if u in listed}
        return BudgetsView(budgets=rows, parked=mine, parked_complete=parked.complete)

    async def set_budget(self, who: Identity, user: str, budget: Any) -> Any:
        """``saga budget set``: when the new budget is not spent, the parked sagas wake."""
        from saga.console.budgets import BudgetSet
        from saga.state import budgets

        with _audited(who, "set_budget", "", user_id=user, daily=budget.daily,
                      monthly=budget.monthly):  # fmt: skip
            status, woken = await budgets.set_and_wake(self.sagas.sm, user, budget)
        return BudgetSet(budget=status, woken=woken)

    async def clear_budget(self, who: Identity, user: str) -> Any:
        """``saga budget clear --json``: the user's parked sagas wake."""
        from saga.state import budgets

        with _audited(who, "clear_budget", "", user_id=user):
            had, woken = await budgets.clear_and_wake(self.sagas.sm, user)
        return shapes.BudgetCleared(user_id=user, cleared=had, woken=woken)


@contextlib.contextmanager
def _audited(who: Identity, action: str, record_id: str, **fields: Any) -> Iterator[None]:
    """Logs an action once it ended: who (subject, role, how signed in), what, on which
    record, and ``ok`` or the error's type. Never a document name or an output."""
    outcome = "ok"
    try:
        yield
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        audit.info("console_action", action=action, actor=who.actor, role=who.role.value,
                   via=who.via, record_id=record_id, outcome=outcome, **fields)  # fmt: skip


def _days(since_ms: int) -> list[str]:
    """The UTC days ``saga costs --since`` covers (at most MAX_DAYS)."""
    from saga.cli.cmd_costs import days_since
    from saga.cli.common import CliError

    try:
        return days_since(since_ms, time.time())
    except CliError as exc:
        raise ConsoleError(str(exc).replace("--since", "since")) from None


def _now_ms() -> int:
    return int(time.time() * 1000)
