"""Actions through the JSON API: only operators act, each action lands in the saga's
history with the person as actor and in the audit log; bad credentials are a 401."""

from __future__ import annotations

import time
from typing import Any

import pytest
from structlog.testing import capture_logs

from saga.console.tokens import Role, add_stored_token
from saga.state.console_auth import revoke_token
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga, get_saga_and_history
from tests.cli.inspect_support import start
from tests.console.sagas import dead, flagged
from tests.console.support import RunningConsole, check_schema, console_signer

pytestmark = pytest.mark.anyio

ACTIONS = [
    ("/sagas/mr-dead/retry", {"step": "parser"}),
    ("/sagas/mr-dead/cancel", {}),
    ("/sagas/mr-flag/review/accept", {"note": "checked"}),
    ("/dead-letters/replay", {"dry_run": False}),
    ("/dead-letters/purge", {}),
]


async def post(console: RunningConsole, token: str, path: str, body: dict[str, Any]) -> Any:
    async with console.client(token) as http:
        return await http.post(f"/api/v1{path}", json=body)


async def test_a_viewer_cannot_act(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """Every action is a 403 for a viewer, and nothing changes."""
    await dead(sm, "mr-dead", "u-1")
    await flagged(sm, "mr-flag", "u-1")
    for path, body in ACTIONS:
        res = await post(console, tokens[Role.VIEWER], path, body)
        assert res.status_code == 403, (path, res.text)
        assert res.json() == {"error": "this needs the operator role; you are signed in as viewer"}
    assert (await get_saga(redis, keys, "mr-dead")).state.value == "failed"
    assert (await get_saga(redis, keys, "mr-flag")).needs_review
    assert await redis.xlen(keys.dead(0, "parser")) == 1


async def test_retry_is_recorded_with_the_operator_as_actor_and_audited(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """A retry from a step runs the retry script with 'console olga' in history, and the
    audit log says who, what and on which record."""
    await dead(sm, "mr-dead", "u-1")
    with capture_logs() as logs:
        res = await post(console, tokens[Role.OPERATOR], "/sagas/mr-dead/retry", {"step": "parser"})
    assert res.status_code == 200, res.text
    check_schema("RetryResult", res.json())
    assert res.json() == {"record_id": "mr-dead", "epoch": 2, "step": "parser", "duplicate": False}
    saga, events = await get_saga_and_history(redis, keys, "mr-dead")
    assert (saga.state.value, saga.step, saga.epoch) == ("pending", "parser", 2)
    assert events[-1].event.value == "retried"
    assert events[-1].detail == "from failed at parser by console olga"
    audit = [e for e in logs if e["event"] == "console_action"]
    assert audit == [{"event": "console_action", "log_level": "info", "action": "retry",
                      "actor": "console olga", "role": "operator", "via": "token",
                      "record_id": "mr-dead", "outcome": "ok", "step": "parser",
                      "force": False, "saga_type": "documents"}]  # fmt: skip


async def test_cancel_and_accept_review_name_the_operator(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """Cancel answers like `saga cancel --json`; accepting a review clears the flags and
    keeps the operator and the note in history."""
    await flagged(sm, "mr-flag", "u-1")
    await start(sm, "mr-new", "u-1")
    op = tokens[Role.OPERATOR]
    res = await post(console, op, "/sagas/mr-new/cancel", {})
    check_schema("CancelResult", res.json())
    assert res.json() == {"record_id": "mr-new", "previous_state": "pending", "state": "cancelled"}
    res = await post(console, op, "/sagas/mr-flag/review/accept", {"note": "checked the PDF"})
    check_schema("ReviewAccepted", res.json())
    assert res.json() == {
        "record_id": "mr-flag",
        "accepted": True,
        "flags_cleared": 1,
        "moved_on_to": "",
    }
    saga, events = await get_saga_and_history(redis, keys, "mr-flag")
    assert not saga.needs_review
    assert (events[-1].event.value, events[-1].detail) == (
        "reviewed", "console olga: checked the PDF")  # fmt: skip
    _, events = await get_saga_and_history(redis, keys, "mr-new")
    assert (events[-1].event.value, events[-1].detail) == ("cancelled", "console olga")
    again = await post(console, op, "/sagas/mr-flag/review/accept", {})
    assert again.status_code == 409
    assert again.json() == {"error": "record 'mr-flag' is not flagged for review."}


async def test_replay_dry_runs_then_replays_the_chosen_and_purge_empties(
    sm: StateMachine, console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """A dry run changes nothing; a replay of chosen records re-runs only those; a purge
    deletes the remaining letters and leaves their sagas failed."""
    await dead(sm, "mr-a", "u-1", step="router")
    await dead(sm, "mr-b", "u-1", step="parser")
    op = tokens[Role.OPERATOR]
    dry = await post(console, op, "/dead-letters/replay", {"dry_run": True})
    check_schema("ReplayDocument", dry.json())
    assert dry.json()["replayed"] == [{"record_id": "mr-a", "step": "router"},
                                      {"record_id": "mr-b", "step": "parser"}]  # fmt: skip
    assert (await get_saga(redis, keys, "mr-a")).state.value == "failed"
    res = await post(console, op, "/dead-letters/replay", {"record_ids": ["mr-b"]})
    assert res.json() == {"dry_run": False, "replayed": [{"record_id": "mr-b", "step": "parser"}],
                          "skipped": [], "errors": []}  # fmt: skip
    assert (await get_saga(redis, keys, "mr-b")).state.value == "pending"
    assert (await get_saga(redis, keys, "mr-a")).state.value == "failed"
    again = await post(console, op, "/dead-letters/replay", {"record_ids": ["mr-b"]})
    assert again.json()["replayed"] == []  # the retry removed its letter
    purged = await post(console, op, "/dead-letters/purge", {})
    check_schema("PurgeDocument", purged.json())
    assert purged.json() == {"purged": 1, "steps": ["grouper", "parser", "router"]}
    assert (await get_saga(redis, keys, "mr-a")).state.value == "failed"
    bad = await post(console, op, "/dead-letters/purge", {"step": "nosuch"})
    assert bad.status_code == 400


async def test_missing_bad_revoked_or_expired_tokens_are_401(
    console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """No credentials, an unknown, malformed, revoked or expired token: 401 with one
    sentence and a Bearer challenge; pages send people to sign in instead."""
    past = int(time.time() * 1000) - 3_600_000
    expired = await add_stored_token(
        redis, keys, "old", Role.OPERATOR, signer=console_signer(), ttl_s=1, now_ms=past
    )
    await revoke_token(redis, keys, "vic")
    cases = {
        "": "sign in with a console token",
        "Bearer saga_nope": "the token is unknown, expired or revoked",
        f"Bearer {tokens[Role.VIEWER]}": "the token is unknown, expired or revoked",
        f"Bearer {expired}": "the token is unknown, expired or revoked",
        "Basic dXNlcjpwdw==": "the Authorization header must be 'Bearer <token>'",
    }
    for header, message in cases.items():
        async with console.client(**({"Authorization": header} if header else {})) as http:
            res = await http.get("/api/v1/sagas")
            assert res.status_code == 401, header
            assert res.json() == {"error": message}
            assert res.headers["www-authenticate"] == 'Bearer realm="saga"'
            page = await http.get("/sagas")
            assert (page.status_code, page.headers["location"]) == (303, "/login")
    async with console.client(tokens[Role.OPERATOR]) as http:
        assert (await http.get("/api/v1/me")).json() == {
            "subject": "olga", "role": "operator", "via": "token"}  # fmt: skip
