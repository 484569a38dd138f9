"""Ready entries are parsed without raising; each malformation is named."""

from __future__ import annotations

import pytest

from saga.worker.entries import Malformed, ReadyEntry, parse_entry


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
        ({b"rid": b"mr-1", b"ep": b"1", b"v": b"99"}, "unknown entry schema version"),
        ({b"rid": b"mr-1", b"ep": b"x", b"v": b"1"}, "is not a number"),
        ({b"rid": b"mr{1}", b"ep": b"1", b"v": b"1"}, "contains '{'"),
    ],
)
def test_malformed_entries_are_named(fields: dict[bytes, bytes], reason: str) -> None:
    """Every kind of malformed entry yields a Malformed with a reason, never an exception."""
    out = parse_entry("1-0", fields)
    assert isinstance(out, Malformed) and reason in out.reason
