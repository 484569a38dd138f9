"""The reviewer role, between viewer and operator: what each role allows, a reviewer
from forward-auth's group and from a token file, and what a reviewer may not do."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from saga.console.tokens import Role, add_stored_token, read_token_file
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from tests.console.conftest import StartConsole
from tests.console.sagas import dead, flagged
from tests.console.support import console_signer

pytestmark = pytest.mark.anyio


def test_each_role_allows_itself_and_those_below() -> None:
    """viewer < reviewer < operator; a producer only starts (and an operator may too)."""
    allowed = {(have, need) for have in Role for need in Role if have.allows(need)}
    assert allowed == {
        (Role.VIEWER, Role.VIEWER),
        (Role.REVIEWER, Role.VIEWER), (Role.REVIEWER, Role.REVIEWER),
        (Role.OPERATOR, Role.VIEWER), (Role.OPERATOR, Role.REVIEWER),
        (Role.OPERATOR, Role.OPERATOR),
        (Role.PRODUCER, Role.PRODUCER), (Role.OPERATOR, Role.PRODUCER),
    }  # fmt: skip


def test_a_token_file_may_name_a_reviewer(tmp_path: Path) -> None:
    """`<name> reviewer <token>` in a token file is a reviewer's token."""
    path = tmp_path / "tokens"
    path.write_text("ann reviewer " + "r" * 30 + "\n")
    [(_, token)] = read_token_file(str(path)).items()
    assert (token.name, token.role) == ("ann", Role.REVIEWER)


async def test_forward_auth_reviewers_by_group_and_what_they_may_not_do(
    start_console: StartConsole, sm: StateMachine, redis: Any, keys: Keys
) -> None:
    """Members of the reviewer group are reviewers (operators win when in both); a
    reviewer reads a review but may not retry, cancel or accept a saga whole."""
    await flagged(sm, "mr-flag", "u-1")
    await dead(sm, "mr-dead", "u-1")
    console = start_console(SAGA_CONSOLE_AUTH_HEADER="X-Forwarded-User")
    who = {"X-Forwarded-User": "ann", "X-Forwarded-Groups": "staff,saga-reviewers"}
    async with console.client(**who) as http:
        me = (await http.get("/api/v1/me")).json()
        assert me == {"subject": "ann", "role": "reviewer", "via": "forward"}
        both = {"X-Forwarded-Groups": "saga-reviewers,saga-operators"}
        assert (await http.get("/api/v1/me", headers=both)).json()["role"] == "operator"
        assert (await http.get("/api/v1/sagas/mr-flag/review")).status_code == 200
    now = int(time.time() * 1000)
    ann = await add_stored_token(redis, keys, "ann", Role.REVIEWER, signer=console_signer(),
                                 now_ms=now)  # fmt: skip
    async with console.client(ann) as http:
        for path, body in (("/sagas/mr-dead/retry", {"step": "parser"}),
                           ("/sagas/mr-dead/cancel", {}),
                           ("/sagas/mr-flag/review/accept", {})):  # fmt: skip
            res = await http.post(f"/api/v1{path}", json=body)
            assert res.status_code == 403, (path, res.text)
            assert (
                res.json()["error"] == "this needs the operator role; you are signed in as reviewer"
            )
