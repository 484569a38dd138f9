"""Compensations with real ``saga worker module:app`` processes and a real server: a
permanent failure undoes the committed steps latest first, each effect once, through a
kill -9 mid-undo; a step whose worker keeps dying (lease expiries) is compensated; an undo
that fails until it succeeds; one that fails for good; two types sharing step names; and
the operator's cancel with and without --compensate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType, HistoryEvent
from tests.app import undo_apps
from tests.app.undo_apps import Trip
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger"
    path.mkdir()
    monkeypatch.setenv("UNDO_LEDGER", str(path))
    return path


def _undo_commits(events: list[HistoryEvent]) -> list[str]:
    return [e.step for e in events if e.event == EventType.COMMITTED and e.step.startswith("undo:")]


async def _wait_states(redis: Any, keys: Keys, rids: list[str], want: str, within: float = 60):
    async def reached() -> bool:
        return await states(redis, keys, rids) == [want] * len(rids)

    await wait_until(reached, within=within, what=f"sagas to be {want}", every=0.05)


async def test_undo_latest_first_each_effect_once_through_kill_9(
    spawn: SpawnWorker, settings: Settings, redis: Any, ledger: Path
) -> None:
    """pay fails for good: hotel then flight are undone; the worker running the hotel's
    undo is killed -9 mid-undo; another takes it over after the lease; each undo's effect
    happens once, under the key its step ran with."""
    env = {"UNDO_LEDGER": str(ledger), "SAGA_HOTEL_LEASE": "2"}
    first = spawn("tests.app.undo_apps:trips", **env)
    await first.wait_ready(within=120)
    rids = [f"t-{i}" for i in range(3)]
    async with undo_apps.trips.client(settings) as trips:
        for rid in rids:
            await trips.start(rid, "u1", input=Trip(who=rid, fail_at="pay", hang_undo=True))
        k = trips.keys

        async def all_hung() -> bool:
            return all((ledger / f"hung@{rid}").exists() for rid in rids)

        await wait_until(all_hung, within=60, what="every hotel undo to hang", every=0.05)
        first.kill()  # SIGKILL, mid-undo
        second = spawn("tests.app.undo_apps:trips", **env)
        await _wait_states(redis, k, rids, "compensated", within=90)
    for rid in rids:
        saga, events = await saga_and_history(redis, k, rid)
        assert _undo_commits(events) == ["undo:hotel", "undo:flight"]
        assert saga.error_message == "card declined"
        reclaimed = [e for e in events if e.event == EventType.RECLAIMED]
        assert [e.step for e in reclaimed] == ["undo:hotel"]
        assert second.owns(reclaimed[0].worker) and first.owns(reclaimed[0].previous_worker)
        assert saga.outputs.keys() == {"pay"} or "flight" not in saga.outputs
    hotel, flight = undo_apps.done("trips-cancel-hotel"), undo_apps.done("trips-cancel-flight")
    assert sorted(hotel) == sorted(f"{r}:hotel:e1" for r in rids)  # the steps' own keys
    assert sorted(flight) == sorted(f"{r}:flight:e1" for r in rids)
    for rid in rids:
        assert hotel[f"{rid}:hotel:e1"] < flight[f"{rid}:flight:e1"]  # latest step first
    assert sorted(undo_apps.runs("trips-cancel-hotel")) == sorted(hotel)  # run once each


async def test_lease_expiries_dead_letter_into_compensation(
    spawn: SpawnWorker, settings: Settings, redis: Any, ledger: Path
) -> None:
    """The worker running pay is killed -9 and pay may lose its lease only once: the next
    worker's claim dead-letters the saga and starts its compensation in that same script
    (no dead letter, no separate call that a second kill could lose); the hotel and the
    flight are undone, each once."""
    env = {"UNDO_LEDGER": str(ledger), "SAGA_PAY_LEASE": "1", "SAGA_PAY_MAX_LEASE_EXPIRIES": "1"}
    first = spawn("tests.app.undo_apps:trips", **env)
    await first.wait_ready(within=120)
    async with undo_apps.trips.client(settings) as trips:
        await trips.start("t-lx", "u1", input=Trip(who="lx", hang_pay=True))
        k = trips.keys

        async def paying() -> bool:
            return (ledger / "paying@t-lx").exists()

        await wait_until(paying, within=60, what="pay to hang", every=0.05, on_timeout=first.tail)
        first.kill()  # SIGKILL, mid-pay: its lease lapses with nobody to heartbeat it
        second = spawn("tests.app.undo_apps:trips", **env)
        await _wait_states(redis, k, ["t-lx"], "compensated", within=90)
    saga, events = await saga_and_history(redis, k, "t-lx")
    assert (saga.error_class, saga.epoch) == ("LeaseExpired", 2)
    dead = [e for e in events if e.event == EventType.DEAD_LETTERED]
    assert [(e.step, e.detail) for e in dead] == [("pay", "compensating")]
    begin = [e for e in events if e.event == EventType.COMPENSATING]
    assert len(begin) == 1 and "lost its lease" in begin[0].detail
    assert second.owns(dead[0].worker)
    assert _undo_commits(events) == ["undo:hotel", "undo:flight"]
    assert list(undo_apps.done("trips-cancel-hotel")) == ["t-lx:hotel:e1"]
    assert list(undo_apps.done("trips-cancel-flight")) == ["t-lx:flight:e1"]
    assert await redis.xlen(k.dead(k.partition_of("t-lx"), "pay")) == 0


async def test_an_undo_failing_until_it_succeeds_and_one_failing_for_good(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys, redis_url: str, ledger: Path
) -> None:
    """An undo that fails twice is retried with backoff and succeeds; one that fails for
    good ends compensation_failed with a dead letter naming the reason, the flight still
    booked; saga retry resumes it (here it fails again: the hotel still refuses)."""
    worker = spawn("tests.app.undo_apps:trips", UNDO_LEDGER=str(ledger))
    await worker.wait_ready(within=120)
    async with undo_apps.trips.client(settings) as trips:
        await trips.start("t-ok", "u1", input=Trip(who="a", fail_at="pay", undo_fails=2))
        await trips.start("t-bad", "u1", input=Trip(who="b", fail_at="pay", undo_fails=-1))
        k = trips.keys
        await _wait_states(redis, k, ["t-ok"], "compensated")
        await _wait_states(redis, k, ["t-bad"], "compensation_failed")
    saga, events = await saga_and_history(redis, k, "t-ok")
    retried = [e for e in events if e.event == EventType.RETRY_SCHEDULED]
    assert [(e.step, e.attempt) for e in retried] == [("undo:hotel", 1), ("undo:hotel", 2)]
    assert _undo_commits(events) == ["undo:hotel", "undo:flight"]
    saga, events = await saga_and_history(redis, k, "t-bad")
    assert (saga.step, saga.error_class) == ("undo:hotel", "PermanentError")
    assert _undo_commits(events) == []
    assert "t-bad:flight:e1" not in undo_apps.done("trips-cancel-flight")
    dead = cli_json(keys, redis_url, "dlq", "list", "--type", "trips", "--json")
    rows = [(d["record_id"], d["step"], d["error_message"]) for d in dead["dead_letters"]]
    assert rows == [("t-bad", "undo:hotel", "the hotel refuses to cancel")]
    shown = cli_json(keys, redis_url, "show", "t-bad", "--type", "trips", "--json")
    validate("show", shown)
    assert (shown["saga"]["state"], shown["saga"]["step"]) == ("compensation_failed", "undo:hotel")
    listed = cli_json(keys, redis_url, "list", "--type", "trips", "--state", "compensation_failed",
                      "--json")  # fmt: skip
    assert [r["record_id"] for r in listed["sagas"]] == ["t-bad"]
    retried = cli(keys, redis_url, "retry", "t-bad", "--type", "trips")  # resumes the undos
    assert retried.returncode == 0, retried.stderr

    async def failed_again() -> bool:
        s, _ = await saga_and_history(redis, k, "t-bad")
        return s.state == "compensation_failed" and s.epoch == saga.epoch + 1

    await wait_until(failed_again, within=60, what="the resumed undo to fail again", every=0.05)


async def test_two_types_sharing_step_names_compensate_their_own(
    spawn: SpawnWorker, settings: Settings, redis: Any, ledger: Path
) -> None:
    """trips and tours both have flight and hotel: each type's undos run its own code."""
    for name in ("trips", "tours"):
        await spawn(f"tests.app.undo_apps:{name}", UNDO_LEDGER=str(ledger)).wait_ready(within=120)
    async with undo_apps.trips.client(settings) as trips, undo_apps.tours.client(settings) as tours:
        for c in (trips, tours):
            await c.start("same-id", "u1", input=Trip(who="x", fail_at="pay"))
        for c in (trips, tours):
            await _wait_states(redis, c.keys, ["same-id"], "compensated")
    for kind in ("trips", "tours"):
        assert list(undo_apps.done(f"{kind}-cancel-hotel")) == ["same-id:hotel:e1"]
        assert list(undo_apps.done(f"{kind}-cancel-flight")) == ["same-id:flight:e1"]


async def test_cancel_with_and_without_compensate_and_the_cli_views(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys, redis_url: str, ledger: Path
) -> None:
    """Two sagas wait at the hotel (only the flight's worker runs): plain cancel leaves the
    flight booked; cancel --compensate undoes it. show draws the undo row, list filters by
    the new states, and the JSON documents fit their schemas."""
    worker = spawn("tests.app.undo_apps:trips", "flight", UNDO_LEDGER=str(ledger))
    await worker.wait_ready(within=120)
    async with undo_apps.trips.client(settings) as trips:
        for rid in ("c-plain", "c-comp"):
            await trips.start(rid, "u1", input=Trip(who=rid))
        k = trips.keys

        async def at_hotel() -> bool:
            got = [await trips.get(r) for r in ("c-plain", "c-comp")]
            return [(s.state, s.step) for s in got] == [("pending", "hotel")] * 2

        await wait_until(at_hotel, within=60, what="both sagas to wait at the hotel", every=0.05,
                         on_timeout=worker.tail)  # fmt: skip
    plain = cli_json(keys, redis_url, "cancel", "c-plain", "--type", "trips", "--json")
    assert (plain["previous_state"], plain["state"]) == ("pending", "cancelled")
    comp = cli_json(keys, redis_url, "cancel", "c-comp", "--type", "trips", "--compensate",
                    "--json")  # fmt: skip
    validate("cancel", comp)
    assert (comp["previous_state"], comp["state"], comp["first_undo"]) == (
        "pending", "compensating", "undo:flight")  # fmt: skip
    await _wait_states(redis, k, ["c-comp"], "compensated")
    assert list(undo_apps.done("trips-cancel-flight")) == ["c-comp:flight:e1"]
    again = cli(keys, redis_url, "cancel", "c-comp", "--type", "trips", "--compensate")
    assert (again.returncode, again.stdout) == (0, "saga c-comp is already compensated\n")
    refused = cli(keys, redis_url, "cancel", "c-comp", "--type", "trips")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "compensated" in refused.stderr

    shown = cli(keys, redis_url, "show", "c-comp", "--type", "trips")
    assert shown.returncode == 0, shown.stderr
    assert "compensated" in shown.stdout and "undo:flight" in shown.stdout
    doc = cli_json(keys, redis_url, "show", "c-comp", "--type", "trips", "--json")
    validate("show", doc)
    assert doc["saga"]["state"] == "compensated"
    assert [(a["step"], a["outcome"]) for a in doc["attempts"]][-1] == ("undo:flight", "committed")
    listed = cli_json(
        keys, redis_url, "list", "--type", "trips", "--state", "compensated", "--json"
    )
    validate("list", listed)
    assert [r["record_id"] for r in listed["sagas"]] == ["c-comp"]
    text = cli(keys, redis_url, "list", "--type", "trips", "--state", "cancelled")
    assert "c-plain" in text.stdout and "c-comp" not in text.stdout


def validate(name: str, doc: Any) -> None:
    import json

    import jsonschema

    from saga.cli import shapes

    schema = json.loads((shapes.SCHEMAS / f"{name}.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
