"""``saga import``: an export (``saga.state.archive``) read back into an empty keyspace,
for an investigation or a restore drill — one ``import_record`` script per saga (more
for a history longer than one call takes), each idempotent, so a re-run after an
interruption finishes what is missing and writes nothing twice.

Only into an empty keyspace (no saga hash of any type, ``keyspace_in_use``): an import
never merges with live sagas. Imported sagas get no queue entries: those that were
active wait for an operator (``saga retry``); ended ones are swept at their retention,
as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from saga.state import history_codec
from saga.state.archive import ArchivedSaga, decode_value
from saga.state.codes import RC, to_code
from saga.state.keys import Keys
from saga.state.model import SagaState
from saga.state.replies import text
from saga.state.scripts import evalsha

_ENTRIES = 256
"""History entries per call (the script takes at most 512)."""
_FIELDS = 4096


class ImportReport(msgspec.Struct, kw_only=True):
    imported: int = 0
    """Sagas written by this run."""
    present: int = 0
    """Sagas already there (an earlier run of the same import): only missing entries."""
    entries: int = 0
    """History entries written."""
    active: list[str] = []
    """Records imported in an active state: they wait for ``saga retry``."""


async def keyspace_in_use(client: Any, keys: Keys) -> str:
    """A saga hash of this keyspace (any type, any partition), or "" when it has none."""
    async for raw in client.scan_iter(match=keys.every_saga_pattern(), count=1000):
        return text(raw)
    return ""


async def import_sagas(
    client: Any, keys: Keys, docs: Iterable[ArchivedSaga], report: ImportReport, op: str
) -> ImportReport:
    """Write each saga of ``docs`` (each into its own type's keys)."""
    for doc in docs:
        await import_one(client, keys.of_type(doc.saga_type), doc, report, op)
    return report


async def import_one(
    client: Any, keys: Keys, doc: ArchivedSaga, report: ImportReport, op: str
) -> None:
    if len(doc.saga) > _FIELDS:
        raise ValueError(f"record {doc.record_id} has more than {_FIELDS} fields")
    rk = keys.record(doc.record_id)
    p, idx = rk.partition, doc.indexes
    state = SagaState(doc.state)
    ks = [rk.saga, rk.history, keys.created_index(p), keys.user_index(p, doc.user_id)]
    ks += [keys.state_index(p, state), keys.review_index(p), keys.retired(p)]
    scores = [_score(idx.get(n)) for n in ("created", "user", "state", "review", "retired")]
    fields: list[Any] = []
    for name, value in doc.saga.items():
        fields += [name, decode_value(value)]
    history = doc.history
    first = True
    while first or history:
        chunk, history = history[:_ENTRIES], history[_ENTRIES:]
        args: list[Any] = [doc.record_id, doc.user_id, *scores, op, "1" if first else "0"]
        args += [len(fields) // 2 if first else 0, *(fields if first else [])]
        args.append(len(chunk))
        for entry_id, entry in chunk:
            # the archive holds each event's names; the history gets schema 2's one field
            packed = history_codec.pack({n: decode_value(v) for n, v in entry.items()})
            args += [entry_id, 1, history_codec.PACKED, packed]
        reply = await evalsha(client, "import_record", ks, args)
        code = to_code(reply[0])
        if code == RC.USER_MISMATCH:
            raise ValueError(
                f"record {doc.record_id} is there already for another user ({text(reply[1])})"
            )
        if first:
            if code == RC.DUPLICATE:
                report.present += 1
            else:
                report.imported += 1
                if not state.terminal:
                    report.active.append(doc.record_id)
        report.entries += int(reply[2])
        first = False


def _score(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if value == int(value) else repr(value)
