"""``saga export`` and ``saga import`` in subprocesses on a real server: sealed values stay
sealed unless --decrypt, an import reproduces every hash, history and index entry, a cut
export resumes to the same lines, and a non-empty keyspace is refused in one sentence."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from saga.state.history_codec import event_fields
from saga.state.keys import Keys
from saga.state.model import FailAction
from saga.state.sealing import Sealer
from tests.cli.inspect_support import cli, commit, fail, machine, run_to_dead, start
from tests.cli.test_json_shapes import validate

pytestmark = pytest.mark.anyio

KEY = base64.b64encode(b"k" * 32).decode()
SECRET = "blood glucose 7.1 mmol/L"


def sealed_keys(keys: Keys) -> Keys:
    return Keys(prefix=keys.prefix, partitions=1, sealer=Sealer(keys=[("k1", b"k" * 32)]))


ENV = {"SAGA_DATA_KEYS": f"k1:{KEY}"}


async def some_sagas(redis: Any, keys: Keys) -> list[str]:
    """Three sagas that ended (completed, failed, cancelled-free) and one still running,
    their inputs holding the secret text (sealed)."""
    sm = await machine(redis, keys)
    records = []
    for i in range(3):
        await sm.start(f"r-{i}", "u-1", "router", input_json=f'{{"t": "{SECRET}"}}'.encode())
        records.append(f"r-{i}")
    for _ in range(3):
        await commit(sm, "router")
    await commit(sm, "parser")
    await commit(sm, "grouper")  # r-0 completed
    await fail(sm, "parser", FailAction.DEAD, error=("ParseError", "no table"))  # r-1 failed
    await run_to_dead(sm, "r-x", "router", user="u-2")
    return [*records, "r-x"]


async def snapshot(redis: Any, keys: Keys, records: list[str]) -> dict[str, Any]:
    """Every hash, history and index entry of ``records`` (the op id left out)."""
    out: dict[str, Any] = {}
    for r in records:
        rk = keys.record(r)
        h = await redis.hgetall(rk.saga)
        h.pop(b"op", None)
        rows = await redis.xrange(rk.history)
        out[r] = (h, [(i, event_fields(f)) for i, f in rows])
    for p in keys.all_partitions():
        for idx in (keys.created_index(p), keys.retired(p), *keys.state_indexes(p)):
            out[idx.split("}", 1)[1]] = out.get(idx.split("}", 1)[1], []) + await redis.zrange(
                idx, 0, -1, withscores=True
            )
    return out


async def test_export_keeps_sealed_values_sealed_and_import_reproduces_everything(
    redis: Any, keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """The export holds no clear patient text; imported into an empty prefix every hash,
    history entry (same ids) and index score is as it was; --decrypt opens the values."""
    keys = sealed_keys(keys)
    records = await some_sagas(redis, keys)
    out = tmp_path / "audit.jsonl"
    res = cli(keys, redis_url, "export", "-o", str(out), env=ENV)
    assert res.returncode == 0, res.stderr
    assert "exported 4 saga(s)" in res.stderr
    body = out.read_text()
    assert SECRET not in body and len(body.splitlines()) == 4
    assert {json.loads(x)["record_id"] for x in body.splitlines()} == set(records)
    opened = cli(keys, redis_url, "export", "--decrypt", env=ENV)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.count(SECRET) == 3  # each input, in clear
    assert body.count('"b64":') >= 4  # sealed inputs and outputs, as they are stored

    other = Keys(prefix=f"t{uuid.uuid4().hex[:10]}", partitions=1, sealer=keys.sealer)
    res = cli(other, redis_url, "import", str(out), "--json", env=ENV)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    validate("import", doc)
    for line in body.splitlines():
        validate("export-line", json.loads(line))
    assert (doc["imported"], doc["present"]) == (4, 0)
    assert doc["active"] == ["r-2"]
    assert await snapshot(redis, other, records) == await snapshot(redis, keys, records)
    show = cli(other, redis_url, "show", "r-0", "--json", env=ENV)
    assert show.returncode == 0 and json.loads(show.stdout)["saga"]["state"] == "completed"

    again = cli(other, redis_url, "import", str(out), env=ENV)
    assert again.returncode == 1
    assert "not empty" in again.stderr and again.stderr.count("\n") == 1
    resumed = cli(other, redis_url, "import", str(out), "--resume", "--json", env=ENV)
    assert json.loads(resumed.stdout)["present"] == 4  # nothing written twice


async def test_a_cut_export_resumes_to_the_same_lines(
    redis: Any, keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """A file cut in the middle of a line, --resume'd, ends with exactly the lines of an
    uninterrupted export; --cursor starts after a line; --user and --since select."""
    sm = await machine(redis, keys)
    for i in range(450):  # more than two pages of the created index
        await start(sm, f"r-{i:04d}", f"u-{i % 3}")
    whole = tmp_path / "whole.jsonl"
    assert cli(keys, redis_url, "export", "-o", str(whole)).returncode == 0
    lines = whole.read_bytes().splitlines(keepends=True)
    assert len(lines) == 450
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:300]) + lines[300][:40])
    res = cli(keys, redis_url, "export", "-o", str(cut), "--resume")
    assert res.returncode == 0, res.stderr
    assert "exported 150 saga(s)" in res.stderr
    assert cut.read_bytes() == whole.read_bytes()

    cursor = json.loads(lines[99])["cursor"]
    after = cli(keys, redis_url, "export", "--cursor", cursor)
    assert after.stdout.encode().splitlines(keepends=True) == lines[100:]
    mine = cli(keys, redis_url, "export", "--user", "u-1").stdout.splitlines()
    assert len(mine) == 150 and all(json.loads(x)["user_id"] == "u-1" for x in mine)
    assert cli(keys, redis_url, "export", "--since", "2d").stdout.count("\n") == 450
    assert cli(keys, redis_url, "export", "--since", "2999-01-01").stdout == ""


async def test_bad_input_is_one_sentence(
    redis: Any, keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """A bad --since or cursor, --resume without a file, --decrypt without a key, an import
    line that is not an export: one sentence, exit 2."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"nope": 1}\n')
    for argv in (
        ("export", "--since", "yesterday"),
        ("export", "--cursor", "x"),
        ("export", "--resume"),
        ("export", "--decrypt"),
        ("import", str(bad)),
        ("import", str(tmp_path / "missing.jsonl")),
    ):
        res = cli(keys, redis_url, *argv, env={"SAGA_DATA_KEYS": "", "SAGA_DATA_KEY": ""})
        assert res.returncode == 2, (argv, res.stderr)
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr


async def test_a_parquet_export_holds_the_same_sagas(
    redis: Any, keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """--format parquet: one row a saga, in the order and with the values of the JSON Lines
    export (hash, history and indexes as JSON text); it needs -o FILE (exit 2 without)."""
    import pyarrow.parquet as pq

    sm = await machine(redis, keys)
    for i in range(30):
        await start(sm, f"r-{i:02d}", "u-1")
    await commit(sm, "router")
    lines = cli(keys, redis_url, "export").stdout.splitlines()
    out = tmp_path / "audit.parquet"
    res = cli(keys, redis_url, "export", "--format", "parquet", "-o", str(out))
    assert res.returncode == 0, res.stderr
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == len(lines) == 30
    for row, line in zip(rows, lines, strict=True):
        doc = json.loads(line)
        assert (row["record_id"], row["state"], row["cursor"]) == (
            doc["record_id"], doc["state"], doc["cursor"],
        )  # fmt: skip
        assert json.loads(row["saga"]) == doc["saga"]
        assert json.loads(row["history"]) == [list(e) for e in doc["history"]]
    assert cli(keys, redis_url, "export", "--format", "parquet").returncode == 2
