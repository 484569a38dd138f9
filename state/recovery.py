"""Recovery of idle entries (XAUTOCLAIM past the lease) and quarantine of malformed ones."""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from saga.state.codes import to_code
from saga.state.keys import GROUP
from saga.state.machine import StateMachine
from saga.state.replies import text
from saga.state.scripts import evalsha

Entry = tuple[str, dict[bytes, bytes]]


class Recovered(msgspec.Struct, frozen=True):
    next_start: str
    entries: list[Entry]
    deleted: list[str]


async def recover_idle(
    sm: StateMachine,
    step: str,
    partition: int,
    *,
    worker: str,
    min_idle_ms: int,
    count: int = 50,
    start: str = "0-0",
) -> Recovered:
    """Take over up to ``count`` entries idle for ``min_idle_ms``; deleted ones are recorded."""
    keys = [sm.keys.ready(partition, step), sm.keys.quarantine(partition)]
    args = [GROUP, worker, min_idle_ms, min(count, 100), start]
    reply = await sm._resend(lambda: evalsha(sm.client, "recover_idle", keys, args))
    to_code(reply[0])
    entries: list[Entry] = []
    for entry_id, flat in reply[2]:
        fields = dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {}
        entries.append((text(entry_id), fields))
    return Recovered(text(reply[1]), entries, [text(d) for d in reply[3]])


def encode_raw(fields: dict[Any, Any]) -> str:
    """Encode an entry's raw fields for the quarantine, keeping undecodable bytes as base64."""

    def enc(v: Any) -> str:
        if isinstance(v, bytes):
            try:
                return v.decode("utf-8")
            except UnicodeDecodeError:
                return "base64:" + base64.b64encode(v).decode()
        return str(v)

    return msgspec.json.encode({enc(k): enc(v) for k, v in fields.items()}).decode()


async def quarantine(
    sm: StateMachine,
    step: str,
    partition: int,
    entry_id: str,
    reason: str,
    raw: dict[Any, Any],
    record_id: str = "",
) -> str:
    """Move a malformed entry to the partition's quarantine stream and acknowledge it;
    returns the quarantine entry's id ("" if it was done already: the call is idempotent).

    With the (valid) ``record_id`` the entry names, a saga waiting on this very entry is
    dead-lettered: it would otherwise stay pending forever with nothing queued."""
    k = sm.keys
    keys = [k.ready(partition, step), k.quarantine(partition)]
    args: list[Any] = [GROUP, entry_id, reason, encode_raw(raw)]
    if record_id and k.partition_of(record_id) == partition:
        rk = k.record(record_id)
        keys += [rk.saga, rk.history, k.dead(partition, step), k.stats(partition)]
        keys += k.state_indexes(partition)
        # The cap's keys always (empty without one): the slot the saga holds there goes.
        keys += [k.inflight(partition, step), k.deferred(partition, step)]
        keys.append(k.retired(partition))
        args += [step, sm.limits.history_maxlen, record_id, sm.limits.retention.arg()]
    reply = await sm._resend(lambda: evalsha(sm.client, "quarantine_entry", keys, args))
    to_code(reply[0])
    return text(reply[1])
