"""What a release refuses when a type's steps changed with sagas in flight (docs/sagas.md):
a worker will not start while sagas wait at a step its release removed and no live worker
serves it; a stored input its step's new type cannot decode is dead-lettered with a clear
reason, never run. Real workers, a real server."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import SagaState
from saga.state.presence import Presence, announce, withdraw
from tests.executor.conftest import SpawnWorker
from tests.executor.support import Worker, saga_and_history, server_ms, states, wait_until
from tests.upgrade import releases

pytestmark = pytest.mark.anyio


async def _committed(redis: Any, k: Keys, rid: str, step: str, w: Worker) -> None:
    async def done() -> bool:
        assert w.alive(), w.tail()
        saga, _ = await saga_and_history(redis, k, rid)
        return step in saga.outputs

    await wait_until(done, within=60, what=f"{rid} to commit {step}", on_timeout=w.tail)


async def _stop(w: Worker) -> None:
    """SIGTERM: the worker drains and withdraws its presence at once (a kill -9's would
    last its TTL)."""
    w.signal(signal.SIGTERM)
    assert await w.wait_exit(within=30) == 0, w.tail()


async def test_a_worker_refuses_to_strand_sagas_at_a_step_its_release_removed(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys
) -> None:
    """v2's take sends a saga to check; v1 (no check) refuses to start, in one sentence,
    while nothing serves check; it starts beside a live v2 worker of check, which finishes
    the saga."""
    v2 = spawn("tests.upgrade.releases:v2", "take")
    async with releases.v2.client(settings) as client:
        await client.start("at-check", "u", input=releases.Box(item="a"))
        k = client.keys
    await v2.wait_ready()
    await _committed(redis, k, "at-check", "take", v2)
    await _stop(v2)

    refused = spawn("tests.upgrade.releases:v1")
    assert await refused.wait_exit(within=90) == 2, refused.tail()
    last = refused.log.read_text().strip().splitlines()[-1]
    assert last == (
        "saga: 1 saga(s) of type 'parcels' wait at step 'check', which this release removed "
        "or renamed, and no live worker serves it; run a worker of the previous release for "
        "'check' until `saga top` shows nothing there, or `saga retry --step` them onto a "
        "step this release has."
    ), refused.tail()
    assert await states(redis, k, ["at-check"]) == ["pending"]

    # A live worker of v2 serving check, as its presence says (a real one would take the
    # saga before v1 is up: the race is not what this holds).
    old = Presence(worker="v2-old", saga_type="parcels", steps=("check",), host="h", pid=1)
    await announce(redis, keys, old, await server_ms(redis))
    v1 = spawn("tests.upgrade.releases:v1")
    await v1.wait_ready()
    [warned] = v1.logged("removed_step_in_flight")
    assert (warned["step"], warned["waiting"]) == ("check", 1)
    await withdraw(redis, keys, "v2-old")
    keeper = spawn("tests.upgrade.releases:v2", "check")

    async def done() -> bool:
        return await states(redis, k, ["at-check"]) == ["completed"]

    await wait_until(done, within=60, what="the saga to complete", on_timeout=keeper.tail)
    saga, _ = await saga_and_history(redis, k, "at-check")
    assert '"v2/check"' in saga.outputs["check"] and '"v1/ship"' in saga.outputs["ship"]


async def test_an_input_its_new_type_cannot_decode_is_dead_lettered_with_the_reason(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys
) -> None:
    """v2's check stores a Box; v4's ship takes a Label that requires an address: the saga
    is dead-lettered at ship (InvalidInputError, the field named), and ship never ran."""
    v2 = spawn("tests.upgrade.releases:v2", "take", "check")
    async with releases.v2.client(settings) as client:
        await client.start("old-box", "u", input=releases.Box(item="a"))
        k = client.keys
    await v2.wait_ready()
    await _committed(redis, k, "old-box", "check", v2)
    await _stop(v2)
    v4 = spawn("tests.upgrade.releases:v4")
    await v4.wait_ready()

    async def failed() -> bool:
        return await states(redis, k, ["old-box"]) == [SagaState.FAILED.value]

    await wait_until(failed, within=60, what="the saga to be dead-lettered", on_timeout=v4.tail)
    saga, _ = await saga_and_history(redis, k, "old-box")
    assert (saga.step, saga.error_class) == ("ship", "InvalidInputError")
    assert saga.error_message == (
        "input of step 'ship' is invalid (ValidationError: missing field `address`): its type "
        "Label does not read what the step before stored (changed by a release?)"
    )
    assert "ship" not in saga.outputs
    assert v4.alive() and "Traceback" not in v4.log.read_text()
