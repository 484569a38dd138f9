"""What is stored of an embedding and what a provider's embeddings reply holds: vectors
as float32 bytes behind a schema byte, and a reply's vectors checked one per input."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from saga.steps.errors import PermanentError

_VECTOR_SCHEMA = b"\x01"


def encode_vector(vector: Sequence[float]) -> bytes:
    """float32, little-endian, behind a schema byte: 4 bytes a dimension."""
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return _VECTOR_SCHEMA + packed.tobytes()


def decode_vector(raw: bytes) -> list[float] | None:
    """The vector, or None for an entry of another schema (then it is fetched again)."""
    if not raw.startswith(_VECTOR_SCHEMA) or (len(raw) - 1) % 4:
        return None
    packed = array("f")
    packed.frombytes(raw[1:])
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tolist()


def response_vectors(response: Any, expected: int) -> list[list[float]]:
    """The vectors in input order (``index``), checked: one per text, all numbers."""
    data = getattr(response, "data", None) or []
    rows: list[tuple[int, list[float]]] = []
    for position, item in enumerate(data):
        entry = item if isinstance(item, Mapping) else getattr(item, "__dict__", {})
        vector = entry.get("embedding")
        try:
            if not isinstance(vector, list) or not vector:
                raise TypeError
            rows.append((int(entry.get("index", position)), [float(x) for x in vector]))
        except (TypeError, ValueError):
            raise PermanentError(
                "the embedding provider answered an item without a vector"
            ) from None
    rows.sort(key=lambda row: row[0])
    if [i for i, _ in rows] != list(range(expected)):
        raise PermanentError(
            f"the embedding provider answered {len(rows)} vectors for {expected} texts"
        )
    return [vector for _, vector in rows]


def prompt_tokens(response: Any) -> int:
    usage = getattr(response, "usage", None)
    return int(getattr(usage, "prompt_tokens", 0) or 0)
