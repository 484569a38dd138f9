"""What each feature of a transition costs, measured one at a time (``saga bench --features``).

Worker side (here): each feature alone, in this process, as the executor uses it,
in µs of CPU per call (one call per step transition unless said). Server side:
``saga.bench.server_features``.

The figures explain the engine's worker CPU and server CPU per transition in
``saga bench``; they are not additive to the last microsecond (the event loop
and the socket are not in any of them).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from saga.bench.server_features import Row, server_rows


def _per_call(fn: Callable[[], Any], n: int) -> float:
    fn()  # warm up (imports, caches)
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n * 1e6


async def _per_call_async(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    await fn()
    t0 = time.process_time()
    for _ in range(n):
        await fn()
    return (time.process_time() - t0) / n * 1e6


# -- worker -------------------------------------------------------------------------


async def _log_line(n: int) -> float:
    """One ``step_committed`` line at info, through the production chain, to /dev/null."""
    import structlog

    from saga.telemetry.scope import log_scope
    from saga.wiring.log_output import LineWriterFactory
    from saga.wiring.logs import _json, shared_processors

    saved = structlog.get_config()
    with open(os.devnull, "w") as sink:  # noqa: ASYNC230 (/dev/null never blocks)
        structlog.configure(
            processors=[*shared_processors(), structlog.processors.JSONRenderer(serializer=_json)],
            wrapper_class=structlog.make_filtering_bound_logger(20),
            logger_factory=LineWriterFactory(sink),
            cache_logger_on_first_use=False,
        )
        log = structlog.get_logger("saga.worker")
        ids = {"record_id": "r1", "user_id": "u1", "step": "router", "attempt": 1, "epoch": 1}
        ids |= {"worker": "w-1", "trace_id": "", "span_id": ""}

        async def line() -> None:
            with log_scope(ids):
                log.info("step_committed", duration_seconds=0.0012, next_step="parser")
                log.info("step_committed", duration_seconds=0.0012, next_step="parser")
            await asyncio.sleep(0)  # lets the writer flush, as a loop turn does

        try:
            return await _per_call_async(line, n) / 2
        finally:
            structlog.configure(**saved)


def _metrics(n: int) -> float:
    from saga.telemetry.metrics import Metrics

    obs = Metrics().observer
    return _per_call(lambda: obs.committed("router", 0.0012), n)


def _msgspec(n: int) -> float:
    """Decode a step's input, encode its output (the no-op step's sizes)."""

    class Out(msgspec.Struct):
        step: str

    out, raw = Out("router"), b'{"step":"router"}'
    return _per_call(lambda: (msgspec.json.decode(raw, type=dict), msgspec.json.encode(out)), n)


async def _asyncio_task(n: int) -> float:
    """A task per attempt, awaiting its commit's future (what the executor does)."""
    loop = asyncio.get_running_loop()

    async def attempt(fut: asyncio.Future[int]) -> int:
        return await fut

    async def batch() -> None:
        futs = [loop.create_future() for _ in range(64)]
        tasks = [loop.create_task(attempt(f)) for f in futs]
        await asyncio.sleep(0)
        for f in futs:
            f.set_result(1)
        await asyncio.gather(*tasks)

    return await _per_call_async(batch, max(1, n // 64)) / 64


async def _anyio_task(n: int) -> float:
    """The same with an anyio task group and Event per attempt (the engine before)."""
    import anyio
    import anyio.lowlevel

    async def batch() -> None:
        events = [anyio.Event() for _ in range(64)]

        async def attempt(ev: anyio.Event) -> None:
            await ev.wait()

        async with anyio.create_task_group() as tg:
            for ev in events:
                tg.start_soon(attempt, ev)
            await anyio.lowlevel.checkpoint()
            for ev in events:
                ev.set()

    return await _per_call_async(batch, max(1, n // 64)) / 64


def _claim(i: int) -> Any:
    from saga.state.model import Claim

    return Claim(record_id=f"r{i:07d}", user_id=f"u{i % 100:03d}", step="router",
                 entry_id=f"{i}-0", attempt=1, epoch=1, token="1:1", lease_until_ms=0,
                 input=b"{}", document="", created_ms=0,
                 trace="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")  # fmt: skip


def _tracing(n: int) -> float:
    """A ``process <step>`` span per attempt (no exporter: the SDK's own cost)."""
    from opentelemetry.sdk.trace import TracerProvider

    from saga.state.keys import Keys
    from saga.telemetry import tracing

    claim = _claim(1)
    keys = Keys()
    tracing.use_provider(TracerProvider())

    def span() -> None:
        with tracing.attempt_span(claim, keys, "w-1"):
            tracing.annotate("committed")

    try:
        return _per_call(span, n)
    finally:
        tracing.disable_tracing()


def _otlp_encoding(n: int) -> list[Row]:
    """Encoding finished attempt spans into an OTLP request, per span, in batches of
    512 (the batch processor's size): saga's encoder and the SDK's. Nothing without
    the otlp extra."""
    try:
        from opentelemetry.exporter.otlp.proto.common._internal import trace_encoder
    except ImportError:
        return []
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from saga.state.keys import Keys
    from saga.telemetry import span_encoding, tracing

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracing.use_provider(provider)
    try:
        for i in range(512):
            with tracing.attempt_span(_claim(i), Keys(), "w-1"):
                tracing.annotate("committed")
    finally:
        tracing.disable_tracing()
    spans = list(memory.get_finished_spans())
    batches = max(1, n // len(spans))
    ours = _per_call(lambda: span_encoding.encode_spans(spans).data, batches) / len(spans)
    sdk = _per_call(
        lambda: trace_encoder.encode_spans(spans).SerializePartialToString(), batches
    ) / len(spans)
    return [
        ("worker", "tracing on: OTLP encoding per span (saga's)", ours),
        ("worker", "tracing on: OTLP encoding per span (SDK's)", sdk),
    ]


def _commit_packing(n: int) -> float:
    """Packing a commit_steps EVALSHA of 64 attempts into RESP, per attempt (its 5 keys
    and 17 arguments, and a 64th of the call's 14 keys and 6 arguments), as the
    engine's connections do (hiredis's C packer, ``saga.state.connection``)."""
    from redis.asyncio.connection import Connection

    from saga.state.connection import _hiredis_packing
    from saga.state.keys import Keys

    conn = _hiredis_packing(Connection)()
    k = Keys()
    keys: list[str] = [k.stats(0), k.costs(0, "2026-11-30"), k.retired(0), *k.state_indexes(0),
            k.review_index(0), k.spend(0, "2026-11"), k.holds(0), k.holds_due(0),
            k.waits(0)]  # fmt: skip
    args: list[str | bytes | int] = ["executors", 1000, 86400, 604800, "30", 64]
    for i in range(64):
        rk = k.record(f"mr-2024-{i:04d}")
        keys += [rk.saga, rk.history, rk.pages, k.ready(0, "router"), k.ready(0, "parser")]
        args += ["router", "1:1", f"1764590000000-{i}", "parser", b'{"pages":2}',
                 f"op{i:x}", "", "0", "0.0", "", "w-1", 0, 0, "", 0, 1, "0"]  # fmt: skip
    command = ("EVALSHA", "0" * 40, len(keys), *keys, *args)
    return _per_call(lambda: conn.pack_commands([command]), max(n // 64, 1)) / 64


async def worker_rows(n: int) -> list[Row]:
    return [
        ("worker", "log line at info (step_committed)", await _log_line(n)),
        ("worker", "metrics (counter + duration histogram)", _metrics(n)),
        ("worker", "msgspec (decode input, encode output)", _msgspec(n)),
        ("worker", "task per attempt: asyncio task + future", await _asyncio_task(n)),
        ("worker", "task per attempt: anyio task group + Event", await _anyio_task(n)),
        ("worker", "tracing on: span per attempt (no exporter)", _tracing(n)),
        *_otlp_encoding(n),
        ("worker", "packing one attempt of a commit_steps call (hiredis)", _commit_packing(n)),
    ]


async def measure(n: int = 20_000) -> list[Row]:
    from saga.bench.map_bench import map_rows

    return [*await worker_rows(n), *await server_rows(n), *await map_rows()]


def unit(name: str) -> str:
    """``commands`` for a row that counts Redis commands (``saga.bench.map_bench``), else
    ``us`` (µs of CPU)."""
    return "commands" if name.endswith("(a count)") else "us"


def render(rows: list[Row]) -> str:
    width = max(len(r[1]) for r in rows)
    lines = ["feature costs (µs of CPU per call, one call per step transition, unless a count)"]
    for side, name, us in rows:
        lines.append(f"  {side:6s}  {name:{width}s}  {us:7.2f}")
    return "\n".join(lines)
