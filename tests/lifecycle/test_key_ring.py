"""The data key ring (SAGA_DATA_KEYS): the newest key seals, every key opens what it
sealed, the legacy SAGA_DATA_KEY opens what was sealed before ids, and a value under a
key that is not configured is refused in one sentence naming the key."""

from __future__ import annotations

import base64
import json

import pytest

from saga.config.settings import SettingsError, load_settings
from saga.state.rotation import resealed
from saga.state.sealing import Sealer, SealError, error_detail, error_field, parse_keys, sealer_of

K1, K2, LEGACY = b"1" * 32, b"2" * 32, b"L" * 32


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_the_newest_key_seals_and_every_key_opens() -> None:
    """A value sealed under k1 opens with the ring k2,k1; a new one is sealed under k2,
    which k1 alone cannot open."""
    old = Sealer(keys=[("k1", K1)]).seal(b"hba1c 6.1")
    ring = Sealer(keys=[("k2", K2), ("k1", K1)])
    assert ring.unseal(old) == b"hba1c 6.1"
    new = ring.seal(b"hba1c 6.1")
    assert (ring.key_id_of(old), ring.key_id_of(new)) == ("k1", "k2")
    assert ring.stale(old) and not ring.stale(new)
    with pytest.raises(SealError, match="'k2'"):
        Sealer(keys=[("k1", K1)]).unseal(new)


def test_the_legacy_key_opens_what_it_sealed_beside_a_ring() -> None:
    """Values sealed under SAGA_DATA_KEY (no id) open with it beside a ring, are stale
    there, and are resealed under the ring's newest key; without it they are refused."""
    old = Sealer(LEGACY).seal(b"x")
    both = Sealer(LEGACY, keys=[("k1", K1)])
    assert both.unseal(old) == b"x" and both.stale(old)
    assert both.key_id_of(both.reseal(old)) == "k1"
    with pytest.raises(SealError, match="SAGA_DATA_KEY"):
        Sealer(keys=[("k1", K1)]).unseal(old)
    assert Sealer(LEGACY).key_id_of(Sealer(LEGACY).seal(b"y")) == ""


def test_resealing_finds_sealed_texts_inside_values() -> None:
    """An error's sealed detail and a cached answer's sealed text (inside JSON) are sealed
    again under the newest key; the stale count names the key they were under."""
    from collections import Counter

    k1 = Sealer(keys=[("k1", K1)])
    ring = Sealer(keys=[("k2", K2), ("k1", K1)])
    em = error_field("not found", "/data/p1.pdf", k1).encode()
    cached = b'{"v":1,"text":"' + k1.seal_text("answer").encode() + b'","model":"m"}'
    stale: Counter[str] = Counter()
    again = [resealed(ring, v, stale) for v in (em, cached, b"plain", ring.seal(b"new"))]
    assert stale == {"k1": 2}
    assert again[2] == b"plain" and ring.key_id_of(again[3]) == "k2"
    k2 = Sealer(keys=[("k2", K2)])  # k1 gone: what was under it opens all the same
    assert k2.unseal_text(json.loads(again[1])["text"]) == "answer"
    assert error_detail(again[0].decode(), k2) == "/data/p1.pdf"
    assert resealed(ring, again[0]) == again[0]  # nothing stale left: unchanged


def test_bad_key_rings_are_one_sentence() -> None:
    """A pair without an id, a repeated id, a key that is not base64: SettingsError."""
    for raw in ("nokey", f"a:{b64(K1)},a:{b64(K2)}", "a:!!", f"bad id:{b64(K1)}"):
        with pytest.raises(ValueError):
            parse_keys(raw)
        with pytest.raises(SettingsError):
            load_settings({"SAGA_DATA_KEYS": raw})
    s = load_settings({"SAGA_DATA_KEYS": f"k2:{b64(K2)}, k1:{b64(K1)}"})
    ring = sealer_of(s.data_key, s.data_keys)
    assert ring is not None and ring.current == "k2" and ring.key_ids == ("k2", "k1")
    assert s.masked()["data_keys"] == "***"
