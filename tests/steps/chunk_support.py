"""Pieces of the chunk tests (steps, workers, corpus): the map path run by hand (plan ->
parse_chunk per item -> merge), and a model that reads its request: every ``Name  value
unit`` row on the page of the marker above it, and one diagnosis that every request
repeats (a duplicate across chunks)."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from saga.steps import chunk_steps
from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.models import ParserOutput, RouterOutput
from saga.steps.testing import ManualContext, make_context

ROW = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9 ]+?)  (?P<value>\d+(?:\.\d+)?) (?P<unit>\S+)", re.M)
MARK = re.compile(r"^=== page (\d+)", re.M)


def answer_json(text: str) -> str:
    """The model's answer (JSON) to a request whose user message is ``text``."""
    found = []
    for block in re.split(r"(?m)^(?==== page )", text):
        page = MARK.match(block)
        for row in ROW.finditer(block):
            found.append(
                {
                    "name": row["name"],
                    "value": float(row["value"]),
                    "value_text": row["value"],
                    "unit": row["unit"],
                    "page": int(page[1]) if page else 1,
                    "line": row.group(0),
                }
            )
    diagnoses = [{"name": "Type 2 diabetes", "code": "E11.9"}]
    return json.dumps({"biomarkers": found, "diagnoses": diagnoses})


def row_pages(n: int, per_page: int = 12) -> list[list[str]]:
    """``n`` pages of ``per_page`` rows, each row's name and value its own."""
    return [
        [f"Analyte {chr(65 + p)}{r}  {p * 10 + r}.5 mg/dL  1-99" for r in range(per_page)]
        for p in range(n)
    ]


def ctx(pages: list[str], llm: Any = None, **more: Any) -> ManualContext:
    """A map attempt's context: the pages, the LLM (rules without one), earlier outputs."""
    config = StepConfig(extractor=ExtractorKind.LLM) if llm is not None else StepConfig()
    c = make_context(step="parse_chunk", pages=pages, config=config, llm=llm)
    c.outputs.update(more)
    return c


async def chunked(pages: list[str], inp: RouterOutput, llm: Any = None) -> ParserOutput:
    """plan -> parse_chunk (each item, through its JSON as the map stores it) -> merge."""
    items = await chunk_steps.plan_items(ctx(pages, llm), inp)
    stored = msgspec.json.encode(items)
    decoded = msgspec.json.decode(stored, type=list[chunk_steps.ChunkItem])
    results = [await chunk_steps.parse_chunk(ctx(pages, llm), item) for item in decoded]
    merged = ctx(pages, llm, router=msgspec.json.encode(inp), plan=stored)
    return await chunk_steps.merge(merged, results)
