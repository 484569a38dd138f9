"""Sagas flagged for review through the real CLI: list --review, show (header and
--output), retry --review, review accept."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.requests import CommitRequest
from saga.steps.models import (
    Biomarker,
    Coverage,
    Extraction,
    ParserOutput,
    Provenance,
    Rejected,
)
from tests.cli.inspect_support import cli, cli_json, commit, machine, start
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio

REASON = "1 value rejected by a check; coverage 50% (1 of 2 result-like lines) under 80%"


def parser_output() -> bytes:
    line = "Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L"
    hb = Biomarker(
        name="Hemoglobin",
        canonical_name="Hemoglobin",
        value=11.2,
        value_text="11.2",
        unit="g/dL",
        reference_text="12.0 - 15.5",
        flag="low",
        provenance=Provenance(page=2, line=line, start=12, end=16),
    )
    bad = Rejected(
        name="Sodium",
        value_text="1450",
        unit="mmol/L",
        reason="outside any physiological value for Sodium in mmol/L",
        provenance=Provenance(page=2, line="Sodium 1450 mmol/L", start=7, end=11),
    )
    missed = [Provenance(page=3, line="Iron 80 ug/dL")]
    coverage = Coverage(candidate_lines=2, explained_lines=1, unexplained=missed)
    x = Extraction(biomarkers=[hb], rejected=[bad], coverage=coverage)
    return msgspec.json.encode(ParserOutput.of(x, review=REASON))


async def flagged_and_plain(sm: StateMachine) -> None:
    """mr-flag completes with the parser's review reason, mr-ok completes unflagged."""
    for rid in ("mr-flag", "mr-ok"):
        await start(sm, rid)
        await commit(sm, "router")
        c = await claim_next(sm, "parser", "w1")
        review = REASON if rid == "mr-flag" else ""
        out = parser_output() if rid == "mr-flag" else b"{}"
        req = CommitRequest(output=out, next_step="grouper", delete_pages=True, review=review)
        assert (await sm.commit(c, req)).code.name == "OK"
        await commit(sm, "grouper")


async def test_list_review_shows_only_flagged_sagas(redis: Any, keys: Keys, redis_url: str) -> None:
    """--review lists the flagged saga, its state says 'needs review', JSON has the reason."""
    await flagged_and_plain(await machine(redis, keys))
    res = cli(keys, redis_url, "list", "--review")
    assert res.returncode == 0, res.stderr
    assert [line.split()[0] for line in res.stdout.splitlines()[2:]] == ["mr-flag"]
    assert "completed, needs review" in res.stdout
    rows = cli_json(keys, redis_url, "list")["sagas"]
    assert {r["record_id"]: r["review_reason"] for r in rows} == {
        "mr-flag": f"parser: {REASON}",
        "mr-ok": "",
    }


async def test_show_says_why_and_output_prints_results_with_pages(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """show's header carries the reason; --output prints results with their page,
    rejected values with the reason, and coverage with the unexplained line."""
    await flagged_and_plain(await machine(redis, keys))
    res = cli(keys, redis_url, "show", "mr-flag", "--output")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "completed, needs review" in out
    assert f"review   parser: {REASON}" in out
    [hb] = [line for line in out.splitlines() if line.startswith("Hemoglobin")]
    assert hb.split()[:7] == ["Hemoglobin", "Hemoglobin", "11.2", "g/dL", "low", "12.0", "-"]
    assert hb.split()[8] == "2"  # the page
    [na] = [line for line in out.splitlines() if line.startswith("Sodium")]
    assert "outside any physiological value" in na
    assert "coverage: 1 of 2 result-like lines explained (50%)" in out
    assert "p3: Iron 80 ug/dL" in out
    doc = cli_json(keys, redis_url, "show", "mr-flag", "--output")
    assert doc["saga"]["needs_review"] is True
    assert doc["outputs"]["parser"]["extraction"]["biomarkers"][0]["provenance"]["page"] == 2
    assert "outputs" not in cli_json(keys, redis_url, "show", "mr-flag")


async def test_accept_clears_the_flag_once(redis: Any, keys: Keys, redis_url: str) -> None:
    """review accept clears the flag (exit 0) and records who; a second accept exits 1."""
    await flagged_and_plain(await machine(redis, keys))
    res = cli(keys, redis_url, "review", "accept", "mr-flag", "--note", "checked by hand")
    assert res.returncode == 0, res.stderr
    assert "review gate" not in res.stdout  # it was not waiting at one
    assert cli(keys, redis_url, "list", "--review").stdout.startswith("no sagas match")
    events = cli_json(keys, redis_url, "show", "mr-flag")["events"]
    assert events[-1]["event"] == "reviewed" and "checked by hand" in events[-1]["detail"]
    again = cli(keys, redis_url, "review", "accept", "mr-flag")
    assert again.returncode == 1
    assert "not flagged for review" in again.stderr


async def test_retry_review_reruns_flagged_sagas_from_a_step(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """retry --review --step parser: the dry run lists the flagged saga; the real run
    re-runs it from the parser, which clears its flag."""
    await flagged_and_plain(await machine(redis, keys))
    dry = cli_json(keys, redis_url, "retry", "--review", "--step", "router", "--dry-run")
    assert dry["matched"] == ["mr-flag"] and dry["retried"] == []
    done = cli_json(keys, redis_url, "retry", "--review", "--step", "router", "--yes")
    assert done["retried"] == ["mr-flag"]
    saga = cli_json(keys, redis_url, "show", "mr-flag")["saga"]
    assert (saga["state"], saga["step"], saga["needs_review"]) == ("pending", "router", False)


async def test_wait_says_needs_review_and_exits_6(redis: Any, keys: Keys, redis_url: str) -> None:
    """`start --wait` of a saga that completed flagged for review says so (state and
    reason) and exits 6, not 0; an unflagged one exits 0."""
    await flagged_and_plain(await machine(redis, keys))
    res = cli(keys, redis_url, "start", "mr-flag", "u-1", "--wait")
    assert res.returncode == 6, res.stderr
    assert "completed, needs review at grouper" in res.stdout
    assert f"review parser: {REASON}" in res.stdout
    assert cli(keys, redis_url, "start", "mr-ok", "u-1", "--wait").returncode == 0
