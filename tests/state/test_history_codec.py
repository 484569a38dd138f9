"""History events in both stored shapes: schema 2's one packed field and the older
one-field-per-name entries, read alike by every reader (state/history_codec.py)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import history_codec
from saga.state.keys import Keys
from saga.state.model import EventType
from saga.state.reads import get_history, parse_event
from saga.state.scripts import render

pytestmark = pytest.mark.anyio

OLD = {b"e": b"committed", b"s": b"parser", b"a": b"2", b"ep": b"1", b"t": b"17", b"n": b""}


def test_an_old_entry_reads_as_it_is() -> None:
    """An entry of one stream field per name is returned unchanged."""
    assert history_codec.event_fields(OLD) == OLD


def test_a_packed_entry_reads_as_the_old_one() -> None:
    """Packing and reading back gives the same names and values, as bytes."""
    packed = {history_codec.PACKED: history_codec.pack(OLD)}
    assert history_codec.is_packed(packed) and not history_codec.is_packed(OLD)
    assert history_codec.event_fields(packed) == OLD
    assert parse_event("1-0", packed) == parse_event("1-0", OLD)


def test_a_value_that_is_not_utf8_is_read_as_bytes() -> None:
    """Lua strings are bytes: cmsgpack stores them as msgpack strings even when they are
    not UTF-8, which the lenient reader takes as they are (numbers as their text)."""
    raw = b"\x96\xa2em\xa3x\xffy\xa1a\x02\xa1c\xcb?\xb9\x99\x99\x99\x99\x99\x9a"
    assert history_codec.unpack(raw) == [b"em", b"x\xffy", b"a", b"2", b"c", b"0.1"]


async def test_the_scripts_write_packed_events_every_reader_opens(redis: Any, keys: Keys) -> None:
    """An event written by a script is one field; read as a HistoryEvent, with numbers
    the script passed as Lua numbers (the attempt, the epoch) as their text."""
    assert "cmsgpack.pack" in render("start_saga")
    from saga.state.machine import StateMachine

    sm = StateMachine(redis, keys)
    await sm.start("r-1", "u-1", "router")
    rows = await redis.xrange(keys.history("r-1"))
    assert len(rows) == 1 and list(rows[0][1]) == [history_codec.PACKED]
    (event,) = await get_history(redis, keys, "r-1")
    assert (event.event, event.step, event.epoch) == (EventType.STARTED, "router", 1)
    await redis.xadd(keys.history("r-1"), {k.decode(): v for k, v in OLD.items()})
    old = (await get_history(redis, keys, "r-1"))[1]
    assert (old.event, old.step, old.attempt) == (EventType.COMMITTED, "parser", 2)
