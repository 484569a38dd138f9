"""saga review show|accept|correct|reject|add through the real CLI: items with the
version, decisions recorded with who and the old and new value, the last one re-running
the grouper, bad decisions in one sentence, and two reviewers at once."""

from __future__ import annotations

import subprocess
from typing import Any

import jsonschema
import pytest

from saga.cli.shapes import schema
from saga.state.keys import Keys
from tests.cli.inspect_support import cli, cli_json, machine, spawn
from tests.cli.test_review import flagged_and_plain

pytestmark = pytest.mark.anyio


def valid(name: str, doc: Any) -> Any:
    jsonschema.Draft202012Validator(schema(name)).validate(doc)
    return doc


async def test_show_lists_every_item_with_the_flagged_ones_marked(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """show prints the value, the rejected one and the unexplained line, marks the
    undecided flagged ones and says the version; --json matches its schema."""
    await flagged_and_plain(await machine(redis, keys))
    res = cli(keys, redis_url, "review", "show", "mr-flag")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "review of parser" in lines[0] and "2 flagged item(s)" in lines[0]
    assert lines[0].endswith("version 0")
    ids = [line.split()[0] for line in lines[3:]]
    assert ids == ["b0", "r0*", "u0*"]
    doc = valid("review-show", cli_json(keys, redis_url, "review", "show", "mr-flag"))
    assert (doc["version"], doc["undecided"], doc["complete"]) == (0, 2, False)
    plain = cli(keys, redis_url, "review", "show", "mr-ok")
    assert plain.returncode == 1
    assert plain.stderr.strip() == "saga: record 'mr-ok' has no step flagged for review."


async def test_decisions_complete_the_review_and_the_grouper_reruns(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """correct, reject, add: each is a history event naming the reviewer; the last one
    completes the review, the grouper re-runs on the reviewed values, the original is kept."""
    await flagged_and_plain(await machine(redis, keys))
    got = valid("review-decide", cli_json(keys, redis_url, "review", "correct", "mr-flag",
                                          "b0", "--value", "11.8", "--version", "0"))  # fmt: skip
    assert (got["item"], got["kind"], got["version"], got["completed"]) == ("b0", "correct", 1,
                                                                            False)  # fmt: skip
    res = cli(keys, redis_url, "review", "reject", "mr-flag", "r0", "--note", "typo on scan")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "saga mr-flag: reject r0 recorded (version 2)"
    res = cli(keys, redis_url, "review", "add", "mr-flag", "u0", "--name", "Iron", "--value", "80",
              "--unit", "ug/dL")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "the review is complete, grouper re-runs on the reviewed values" in res.stdout
    show = cli_json(keys, redis_url, "show", "mr-flag", "--output")
    assert (show["saga"]["state"], show["saga"]["step"]) == ("pending", "grouper")
    values = {b["name"]: b for b in show["outputs"]["parser"]["extraction"]["biomarkers"]}
    assert values["Hemoglobin"]["value"] == 11.8
    assert values["Hemoglobin"]["reviewed"]["machine"]["value"] == 11.2
    assert values["Iron"]["reviewed"]["decision"] == "added"
    decided = [e for e in show["events"] if e["event"] == "review_decided"]
    assert [e["detail"].split(" by ")[0] for e in decided] == ["correct b0", "reject r0",
                                                               "add u0"]  # fmt: skip
    assert all(" by cli " in e["detail"] for e in decided)
    assert show["events"][-1]["event"] == "review_completed"
    view = cli_json(keys, redis_url, "review", "show", "mr-flag")
    assert view["complete"] is True and view["undecided"] == 0
    again = cli(keys, redis_url, "review", "reject", "mr-flag", "b0")
    assert again.returncode == 1
    assert "review of record 'mr-flag' is complete" in again.stderr


async def test_a_bad_decision_is_one_sentence_and_exit_2(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """An unknown item, a bad range, correcting an unexplained line, nothing to correct:
    each exits 2 with one sentence and no traceback."""
    await flagged_and_plain(await machine(redis, keys))
    cases = {
        ("correct", "mr-flag", "b7", "--value", "1"): "has no item 'b7'",
        ("correct", "mr-flag", "b0", "--range", "lots"): "is not 'low - high'",
        ("correct", "mr-flag", "u0", "--value", "80"): "an unexplained line can be added",
        ("correct", "mr-flag", "b0"): "say what to correct",
        ("add", "mr-flag", "--name", "Zinc", "--value", "9"): "needs its page and line",
    }
    for args, words in cases.items():
        res = cli(keys, redis_url, "review", *args)
        assert res.returncode == 2, (args, res.stderr)
        assert words in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


async def test_two_reviewers_at_once_one_wins_one_is_told(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """Two reviewers who read version 0 decide r0 at the same moment: one decision is
    recorded, the other exits 1 saying another reviewer decided first."""
    await flagged_and_plain(await machine(redis, keys))
    procs = [
        spawn(keys, redis_url, "review", verb, "mr-flag", "r0", "--version", "0",
              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for verb in ("reject", "accept")
    ]  # fmt: skip
    ends = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    assert sorted(code for code, _, _ in ends) == [0, 1]
    [(_, _, err)] = [e for e in ends if e[0] == 1]
    assert "another reviewer decided on record 'mr-flag' first" in err
    assert "it is at version 1, you read 0" in err
    events = cli_json(keys, redis_url, "show", "mr-flag")["events"]
    assert sum(e["event"] == "review_decided" for e in events) == 1
