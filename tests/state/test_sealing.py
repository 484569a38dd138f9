"""SAGA_DATA_KEY: values sealed with AES-GCM before they reach Redis, opened by every read."""

from __future__ import annotations

import base64
import os

import pytest

from saga.config.settings import SettingsError, load_settings
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.reads import get_saga
from saga.state.sealing import LIST, Sealer, SealError, list_join, list_parts
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio


def test_seal_round_trip_clear_values_pass_and_a_wrong_key_is_refused() -> None:
    """Sealed values open with the key; values stored before the key pass as they are;
    another key is refused with one sentence, never read as garbage."""
    a, b = Sealer(os.urandom(32)), Sealer(os.urandom(32))
    sealed = a.seal(b'{"page": "text"}')
    assert sealed != b'{"page": "text"}' and a.unseal(sealed) == b'{"page": "text"}'
    assert a.unseal(b'{"clear": 1}') == b'{"clear": 1}'
    assert a.unseal_text(a.seal_text("answer")) == "answer"
    with pytest.raises(SealError, match="SAGA_DATA_KEY"):
        b.unseal(sealed)


def test_a_sealed_list_opens_into_json_and_rotates_item_by_item() -> None:
    """A map's fan-in of sealed outputs (state/sealing.py LIST, joined by Lua): it opens into
    head[a,null,b]tail; under a key ring it is stale while an item is sealed under an older
    key, and a reseal keeps its shape with every item under the newest key."""
    old, new = os.urandom(32), os.urandom(32)
    before = Sealer(keys=[("k1", old)])
    items = [before.seal(b'{"a":1}'), b"null", before.seal(b'{"b":2}')]
    value = list_join(b'{"results":', b',"partial":true,"failed":[1]}', items)
    assert value.startswith(LIST) and list_parts(value)[2] == items
    want = b'{"results":[{"a":1},null,{"b":2}],"partial":true,"failed":[1]}'
    assert before.unseal(value) == want and not before.stale(value)
    ring = Sealer(keys=[("k2", new), ("k1", old)])
    assert ring.stale(value) and ring.key_id_of(value) == "k1"
    again = ring.reseal(value)
    assert ring.unseal(again) == want and not ring.stale(again)
    assert {ring.key_id_of(x) for x in list_parts(again)[2] if x != b"null"} == {"k2"}
    with pytest.raises(SealError, match="damaged"):
        ring.unseal(value[:-3])


def test_bad_data_keys_are_settings_errors() -> None:
    """Not base64, or not 16/24/32 bytes: one sentence at start-up; a good key is kept."""
    for bad in ("not base64!", base64.b64encode(b"short").decode()):
        with pytest.raises(SettingsError, match="SAGA_DATA_KEY"):
            load_settings({"SAGA_DATA_KEY": bad})
    good = base64.b64encode(os.urandom(32)).decode()
    settings = load_settings({"SAGA_DATA_KEY": good})
    assert settings.data_key == good and settings.masked()["data_key"] == "***"


async def test_input_document_and_output_are_sealed_in_redis_and_open_on_read(
    sm: StateMachine, redis: object, keys: Keys
) -> None:
    """start, claim and commit with a key: the hash holds ciphertext; claim and get_saga
    give plaintext back."""
    from saga.state.requests import CommitRequest

    sealed_keys = Keys(prefix=keys.prefix, sealer=Sealer(os.urandom(32)))
    sm = StateMachine(redis, sealed_keys)  # the fixture's made the groups
    await sm.start("s-1", "u1", "router", input_json=b'{"n": 1}', document="https://x/d?token=t")
    raw = await redis.hgetall(keys.saga("s-1"))  # type: ignore[attr-defined]
    assert b"token" not in raw[b"doc"] and b'"n"' not in raw[b"out:_input"]
    claim = await claim_next(sm, "router", "w-a")
    assert claim.input == b'{"n": 1}' and claim.document == "https://x/d?token=t"
    await sm.commit(claim, CommitRequest(output=b'{"pages": 2}', next_step=""))
    raw = await redis.hgetall(keys.saga("s-1"))  # type: ignore[attr-defined]
    assert b"pages" not in raw[b"out:router"]
    saga = await get_saga(redis, sealed_keys, "s-1")
    assert saga.outputs == {"router": '{"pages": 2}'} and saga.document == "https://x/d?token=t"
