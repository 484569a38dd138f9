"""``saga export --format parquet``: the export's lines as Parquet rows, for analysts'
tools (the ``parquet`` extra: ``pip install 'saga[parquet]'``, pyarrow).

One row a saga: its scalar fields as columns (``saga_type``, ``record_id``, ``user_id``,
``state``, ``created_ms``, ``cursor``) and its hash, history and index scores as JSON text
columns (``saga``, ``history``, ``indexes``, exactly the JSON Lines values: sealed values
stay ``{"b64": …}``). Rows are written a row group of ``BATCH`` at a time: memory stays
one batch. A Parquet file cannot be appended to: resume with ``--cursor`` into a new file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec

from saga.state.archive import ArchivedSaga

BATCH = 1000


class ParquetMissingError(RuntimeError):
    def __init__(self) -> None:
        super().__init__(
            "--format parquet needs pyarrow: pip install 'saga[parquet]' (or use JSON Lines)"
        )


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetMissingError() from None
    return pa, pq


def schema() -> Any:
    pa, _ = _pyarrow()
    return pa.schema(
        [
            ("v", pa.int32()),
            ("saga_type", pa.string()),
            ("record_id", pa.string()),
            ("user_id", pa.string()),
            ("state", pa.string()),
            ("created_ms", pa.int64()),
            ("saga", pa.string()),
            ("history", pa.string()),
            ("indexes", pa.string()),
            ("cursor", pa.string()),
        ]
    )


async def write_parquet(docs: AsyncIterator[ArchivedSaga], path: str) -> tuple[int, str]:
    """Every doc of ``docs`` into ``path``; (how many, the last cursor)."""
    pa, pq = _pyarrow()
    enc = msgspec.json.Encoder()
    columns: dict[str, list[Any]] = {name: [] for name in schema().names}
    count, last = 0, ""
    with pq.ParquetWriter(path, schema()) as writer:

        def flush() -> None:
            if columns["v"]:
                writer.write_batch(pa.record_batch(columns, schema=schema()))
                for values in columns.values():
                    values.clear()

        async for doc in docs:
            for name in ("v", "saga_type", "record_id", "user_id", "state", "created_ms"):
                columns[name].append(getattr(doc, name))
            columns["saga"].append(enc.encode(doc.saga).decode())
            columns["history"].append(enc.encode(doc.history).decode())
            columns["indexes"].append(enc.encode(doc.indexes).decode())
            columns["cursor"].append(doc.cursor)
            count, last = count + 1, doc.cursor
            if len(columns["v"]) >= BATCH:
                flush()
        flush()
    return count, last
