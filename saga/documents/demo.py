"""``saga demo``: the whole pipeline on the shipped sample PDFs, in one process.

Starts (or reuses) the embedded server, runs executors for every step
in-process, submits the samples (one of them deliberately broken), shows
progress, then each saga's timeline and what was extracted and grouped. The
grouper's optional LLM naming runs through litellm's own ``mock_response``, so
costs are attributed per user and step without any network.

The demo always works under its own key prefix (``<prefix>-demo``): a worker
already running on the same Redis never sees its queues, so it cannot run demo
steps with its own settings, and the demo's sagas stay out of ``saga list``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from typing import Any

import anyio
import msgspec

from saga.config.settings import Settings

MOCK_NAMES = '{"names": {}}'
DEMO_SUFFIX = "-demo"


def demo_prefix(prefix: str) -> str:
    """The demo's key prefix: never the one workers use (prefixes are 32 characters)."""
    return prefix[: 32 - len(DEMO_SUFFIX)] + DEMO_SUFFIX


def demo_settings(settings: Settings) -> Settings:
    """Its own key prefix, offline LLM (mock answers, real cost accounting), quick
    retries, no health port."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    cfg = replace_struct(settings.step_config, llm_group_names=True)
    new: Settings = replace_struct(
        settings,
        key_prefix=demo_prefix(settings.key_prefix),
        step_config=cfg,
        llm_mock_response=settings.llm_mock_response or MOCK_NAMES,
        block_ms=200,
        promote_interval_s=0.2,
    )
    return new


def replace_struct(obj: Any, **changes: Any) -> Any:
    return msgspec.structs.replace(obj, **changes)


async def run_demo(settings: Settings, *, timeout_s: float = 60.0, out: Any = None) -> int:
    """Run the demo; returns the number of sagas that did not end as expected."""
    from saga.api.client import SagaClient
    from saga.samples import list_samples
    from saga.wiring.ports import DefaultPorts
    from saga.wiring.runtime import document_pipeline, keys_of, open_client
    from saga.worker.executor import Executor
    from saga.worker.naming import worker_name

    out = out or sys.stdout
    settings = demo_settings(settings)
    pipeline = document_pipeline(settings).with_overrides(lambda s: replace(s, concurrency=4))
    client = open_client(settings)
    keys = keys_of(settings)
    ports = DefaultPorts(settings, client, keys)
    executor = Executor(
        client=client,
        keys=keys,
        settings=settings,
        pipeline=pipeline,
        steps=pipeline.names,
        ports=ports,
        worker=worker_name(),
    )
    sagas = SagaClient(client, keys, pipeline, settings)
    run_id = time.strftime("%H%M%S")
    samples = list_samples()
    records = {s.record_id + "-" + run_id: s for s in samples}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(executor.run)
            print(
                f"saga demo: {len(records)} sample documents, steps "
                f"{' -> '.join(pipeline.names)}\n",
                file=out,
            )
            for rid, sample in records.items():
                await sagas.start(rid, sample.user_id, document=str(sample.path))
            await _progress(sagas, list(records), timeout_s, out)
            executor.stop()
        return await _report(sagas, records, out, settings.key_prefix)
    finally:
        await ports.aclose()
        await client.aclose()


async def _progress(sagas: Any, records: list[str], timeout_s: float, out: Any) -> None:
    deadline = time.monotonic() + timeout_s
    tty = out.isatty()
    while True:
        states = [await sagas.get(r) for r in records]
        done = sum(s.state.terminal for s in states)
        line = "  ".join(f"{s.record_id.split('-')[1]}:{s.state.value}@{s.step}" for s in states)
        if tty:
            print(f"\r\033[K{done}/{len(records)} finished  {line}"[:200], end="", file=out)
        if done == len(records) or time.monotonic() > deadline:
            if tty:
                print(file=out)
            return
        await anyio.sleep(0.2)


async def _report(sagas: Any, records: dict[str, Any], out: Any, prefix: str) -> int:
    from saga.cli.cmd_show import render
    from saga.steps.models import GrouperOutput, ParserOutput, RouterOutput

    unexpected = 0
    for rid, sample in records.items():
        saga, events = await sagas.get(rid), await sagas.history(rid)
        print(render(saga, events, int(time.time() * 1000)), file=out)
        expected = "failed" if sample.fails_at else "completed"
        if saga.state.value != expected:
            unexpected += 1
        if "grouper" in saga.outputs:
            r = msgspec.json.decode(saga.outputs["router"], type=RouterOutput)
            p = msgspec.json.decode(saga.outputs["parser"], type=ParserOutput)
            g = msgspec.json.decode(saga.outputs["grouper"], type=GrouperOutput)
            names = ", ".join(grp.canonical_name for grp in g.groups[:6])
            more = f" and {len(g.groups) - 6} more" if len(g.groups) > 6 else ""
            print(
                f"  {r.document_name}: {r.page_count} page(s); {p.biomarker_count} biomarkers, "
                f"{p.diagnosis_count} diagnoses, {p.procedure_count} procedures, "
                f"{p.genetic_count} genetic findings; {g.group_count} groups: {names}{more}",
                file=out,
            )
        elif sample.fails_at:
            print(f"  dead-lettered at {saga.step} as intended: {saga.error_class}", file=out)
        print(file=out)
    verdict = "all sagas ended as expected" if not unexpected else f"{unexpected} unexpected"
    print(
        f"saga demo: {verdict}. Its sagas are under the key prefix {prefix}: inspect one "
        f"with `SAGA_KEY_PREFIX={prefix} saga show <record>`, see the dead letter with "
        f"`SAGA_KEY_PREFIX={prefix} saga dlq list`.",
        file=out,
    )
    return unexpected
