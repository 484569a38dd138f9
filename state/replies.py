"""Decoding of script replies into typed results (bytes in, Structs out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from saga.state.codes import RC, to_code
from saga.state.model import Claim


def text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def num(value: Any) -> int:
    if value is None or value in (b"", ""):
        return 0
    try:
        return int(value)  # integers, the common case: no float parse
    except ValueError:
        return int(float(value))


class ClaimOutcome(msgspec.Struct, frozen=True):
    """What the claim script said about one entry."""

    code: RC
    entry_id: str
    record_id: str
    claim: Claim | None = None
    detail: str = ""


def claim_outcome(
    reply: list[Any],
    step: str,
    extra_fields: tuple[str, ...],
    unseal: Callable[[bytes], bytes] | None = None,
) -> ClaimOutcome:
    code = to_code(reply[0])
    entry, record = text(reply[1]), text(reply[2])
    if code not in (RC.OK, RC.DUPLICATE):
        return ClaimOutcome(code, entry, record, None, text(reply[3]) if len(reply) > 3 else "")
    extra = {name: bytes(reply[14 + j] or b"") for j, name in enumerate(extra_fields)}
    if unseal is not None:  # SAGA_DATA_KEY: what may hold patient data arrives sealed
        reply = [
            *reply[:8],
            unseal(bytes(reply[8] or b"")),
            unseal(bytes(reply[9] or b"")),
            *reply[10:12],
            unseal(bytes(reply[12])) if reply[12] else None,
            *reply[13:],
        ]
        # sv:<step> (a step version) is a plain number; outputs and checkpoints are sealed
        extra = {n: v if n.startswith("sv:") else unseal(v) for n, v in extra.items()}
    claim = Claim(
        record_id=record,
        user_id=text(reply[3]),
        step=step,
        entry_id=entry,
        attempt=num(reply[4]),
        epoch=num(reply[5]),
        token=text(reply[6]),
        lease_until_ms=num(reply[7]),
        input=bytes(reply[8] or b""),
        document=text(reply[9]),
        trace=text(reply[10]),
        created_ms=num(reply[11]),
        pages=bytes(reply[12]) if reply[12] else None,
        expired=num(reply[13]),
        extra=extra,
    )
    return ClaimOutcome(code, entry, record, claim)
