"""``saga doctor``: sagas waiting at a step this release removed, said where an operator
looks (issue 34: the worker's start-up refusal, before the workers roll), and the
keyspace's schema version; a keyspace newer than the release is one sentence, exit 2."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.cli.shapes import schema
from saga.state import schema_version
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.presence import Presence, announce
from saga.state.streams import ensure_groups
from tests.cli.inspect_support import cli
from tests.executor.support import server_ms

pytestmark = pytest.mark.anyio
V1 = {"SAGA_PIPELINE": "tests.upgrade.releases:v1"}  # take, ship: no 'check'


async def _two_at_check(redis: Any, keys: Keys) -> Keys:
    """Type parcels as v2 registered it (take, check, ship), two sagas waiting at check."""
    k = keys.of_type("parcels")
    await ensure_groups(redis, k, ["take", "check", "ship"])
    sm = StateMachine(redis, k)
    for rid in ("p-1", "p-2"):
        await sm.start(rid, "u", "check")
    return k


async def test_doctor_names_the_removed_step_and_how_many_wait(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """Unserved: the worker's refusal sentence, exit 1; served by a live worker of the old
    release: a warning naming the step, exit 0; --json matches its schema."""
    import jsonschema

    k = await _two_at_check(redis, keys)
    res = cli(keys, redis_url, "doctor", env=V1)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == (
        f"schema: the keyspace is at version {schema_version.CURRENT}; this release runs on "
        f"{schema_version.OLDEST_RUNNABLE} to {schema_version.CURRENT}"
    )
    assert lines[1].startswith(
        "2 saga(s) of type 'parcels' wait at step 'check', which this release removed or "
        "renamed, and no live worker serves it"
    ) and lines[1].endswith("until then this release's workers refuse to start"), lines
    old = Presence(worker="v2-old", saga_type="parcels", steps=("check",), host="h", pid=1)
    await announce(redis, k, old, await server_ms(redis))
    res = cli(keys, redis_url, "doctor", "--json", env=V1)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, schema("doctor"))
    assert doc["stranded"] == [{"step": "check", "waiting": 2, "served": True}]
    assert doc["ok"] and "a live worker of another release serves it" in doc["findings"][0]


async def test_doctor_on_a_healthy_keyspace_and_on_a_newer_one(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """Nothing stranded: exit 0, one line saying so; a keyspace at a schema newer than this
    release knows: one sentence naming both versions, exit 2, no traceback (as `saga
    show` and every other command)."""
    await _two_at_check(redis, keys)
    res = cli(keys, redis_url, "doctor", env={"SAGA_PIPELINE": "tests.upgrade.releases:v2"})
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[1] == (
        "steps: no saga of type 'parcels' waits at a step this release lacks"
    )
    newer = schema_version.CURRENT + 1
    await redis.hset(keys.schema_version(), "version", newer)
    for argv in (("doctor",), ("show", "p-1", "--type", "parcels")):
        res = cli(keys, redis_url, *argv, env=V1)
        assert res.returncode == 2, (argv, res.stdout, res.stderr)
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
        assert f"schema version {newer}" in res.stderr, res.stderr
        assert f"knows versions up to {schema_version.CURRENT}" in res.stderr
