"""More commands' --json output against their shipped JSON Schemas (saga/cli/schemas):
show --output, review accept, partitions show and migrate, eval. (``saga bench --json``
is validated in tests/bench/test_bench_cli.py, which already runs it.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from saga.state.keys import Keys
from tests.cli.inspect_support import cli, machine
from tests.cli.test_json_shapes import output, validate
from tests.cli.test_review import REASON, flagged_and_plain
from tests.evaluation.test_cmd_eval import saga_eval, write_clean_report

pytestmark = pytest.mark.anyio


async def test_review_and_partition_commands_print_their_shapes(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """show --output and review accept on a flagged saga; partitions show before and after
    `partitions migrate --to 2`, which moves both (terminal) sagas: valid documents."""
    await flagged_and_plain(await machine(redis, keys))
    shown = output(keys, redis_url, "show", "mr-flag", "--output")
    validate("show-output", shown)
    assert set(shown["outputs"]) == {"router", "parser", "grouper"}
    assert shown["outputs"]["parser"]["review"] == REASON
    accepted = output(keys, redis_url, "review", "accept", "mr-flag", "--note", "checked")
    validate("review-accept", accepted)
    assert accepted["record_id"] == "mr-flag" and accepted["accepted"] is True

    before = output(keys, redis_url, "partitions", "show")
    validate("partitions", before)
    assert before["stored"] == 1 and before["migrating_to"] == 0
    migrated = output(keys, redis_url, "partitions", "migrate", "--to", "2")
    validate("partitions-migrate", migrated)
    assert migrated["from_count"] == 1 and migrated["to_count"] == 2 and migrated["done"]
    assert migrated["moved"] + migrated["stayed"] == 2
    after = json.loads(
        cli(keys, redis_url, "partitions", "show", "--json", env={"SAGA_PARTITIONS": "2"}).stdout
    )
    validate("partitions", after)
    assert (after["stored"], after["configured"]) == (2, 2)


def test_partitions_show_before_any_count_is_stored(keys: Keys, redis_url: str) -> None:
    """A fresh keyspace: `stored` is null, still a valid document."""
    shown = output(keys, redis_url, "partitions", "show")
    validate("partitions", shown)
    assert shown["stored"] is None


def test_eval_prints_its_shape(tmp_path: Path) -> None:
    """saga eval --json on a one-document corpus (one wrong value: exit 1) is valid."""
    write_clean_report(tmp_path, glucose_truth=93)
    done = saga_eval(str(tmp_path), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    validate("eval", report)
    assert report["ok"] is False
