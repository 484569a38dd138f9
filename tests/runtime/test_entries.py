"""Ready entries are parsed without raising; each malformation is named."""

from __future__ import annotations

import pytest

from saga.worker.entries import Malformed, Newer, ReadyEntry, parse_entry


def test_good_entry() -> None:
    """rid, ep and v give a ReadyEntry."""
    assert parse_entry("1-0", {b"rid": b"mr-1", b"ep": b"2", b"v": b"1"}) == ReadyEntry(
        "1-0", "mr-1", 2
    )


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, "no fields"),
        ({b"rid": b"\xff\xfe", b"ep": b"1", b"v": b"1"}, "not valid UTF-8"),
        ({b"rid": b"mr-1", b"v": b"1"}, "lacks field(s) ep"),
        ({b"rid": b"mr-1", b"ep": b"1", b"v": b"x"}, "unknown entry schema version"),
        ({b"rid": b"mr-1", b"ep": b"1", b"v": b"0"}, "unknown entry schema version"),
        ({b"rid": b"mr-1", b"ep": b"x", b"v": b"1"}, "is not a number"),
        ({b"rid": b"mr{1}", b"ep": b"1", b"v": b"1"}, "contains '{'"),
    ],
)
def test_malformed_entries_are_named(fields: dict[bytes, bytes], reason: str) -> None:
    """Every kind of malformed entry yields a Malformed with a reason, never an exception."""
    out = parse_entry("1-0", fields)
    assert isinstance(out, Malformed) and reason in out.reason


def test_entries_of_a_newer_release_are_not_malformed() -> None:
    """v above ours: left for a newer worker (Newer), never quarantined; the record id of
    a malformed entry is kept so its waiting saga can be dead-lettered."""
    assert parse_entry("1-0", {b"rid": b"mr-1", b"ep": b"1", b"v": b"2"}) == Newer("1-0", 2)
    bad = parse_entry("1-0", {b"rid": b"mr-1", b"ep": b"one", b"v": b"1"})
    assert isinstance(bad, Malformed) and bad.record_id == "mr-1"
