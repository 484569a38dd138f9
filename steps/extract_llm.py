"""The LLM extractor: the user's model reads the pages and answers JSON, msgspec checks it.

Through the ``LLM`` port only (the runtime binds it to the user's key and
records the cost). The prompt carries the JSON Schema of ``Extraction``; the
answer is decoded with ``msgspec.json.decode(..., type=Extraction)``. One
invalid answer earns one repair request that quotes the validation error:

* the answer held JSON: the repair sends that JSON and the error, not the pages
  again (a schema slip needs no re-reading, and pages are the costly part);
* the answer held no JSON at all: the repair continues the conversation, so
  the pages are in it once.

A second invalid answer is a PermanentError naming the reason. RetryableError
and CircuitOpenError from the port propagate. Neither page text nor completion
text ever reaches an error message or a log line.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence

import msgspec

from saga.steps.context import StepContext
from saga.steps.errors import PermanentError
from saga.steps.models import Extraction

PURPOSE = "extract"
REPAIR_PURPOSE = "extract-repair"
MAX_REASON_CHARS = 200
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")

_INSTRUCTIONS = """\
You extract structured data from a medical lab report.
Reply with exactly one JSON object and nothing else, valid against this JSON Schema:
{schema}
- biomarkers: every lab result. value is the number, or null when the result is not
  a plain number (e.g. "<0.5" or "Negative"); value_text is the result as written;
  reference_low/reference_high are the range bounds (null when absent); reference_text
  is the range as written; flag is "high", "low", "normal" or "" when unknown.
- diagnoses (with the ICD-10 code if written), procedures (with the date as written),
  genetics (gene symbol, variant, interpretation).
- Copy names as written. Use "" and [] for what the report does not state. Invent nothing."""


@functools.cache
def instructions() -> str:
    """The system prompt with the schema; built once per process."""
    schema = json.dumps(msgspec.json.schema(Extraction), separators=(",", ":"))
    return _INSTRUCTIONS.format(schema=schema)


def pages_message(pages: Sequence[str]) -> str:
    """The pages, each under a marker so the model can tell where one ends."""
    return "\n\n".join(f"=== page {number} ===\n{text}" for number, text in enumerate(pages, 1))


def json_part(text: str) -> str | None:
    """The outermost ``{...}`` of an answer (models wrap JSON in fences or prose)."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else None


def decode(text: str) -> Extraction:
    """The answer as an Extraction; raises msgspec.DecodeError (or ValidationError)."""
    return msgspec.json.decode(json_part(text) or text, type=Extraction)


def reason_of(error: Exception) -> str:
    """A validation error with quoted values blanked: they may come from the pages."""
    return _QUOTED.sub("'…'", str(error))[:MAX_REASON_CHARS]


async def extract_llm(ctx: StepContext, pages: Sequence[str]) -> Extraction:
    """Ask the user's model for the extraction; one repair; PermanentError after that."""
    llm = ctx.llm
    if llm is None:
        raise PermanentError(
            "this deployment has no LLM configured; set SAGA_PARSER=rules or configure a model"
        )
    messages = [
        {"role": "system", "content": instructions()},
        {"role": "user", "content": pages_message(pages)},
    ]
    first = await llm.complete(messages, purpose=PURPOSE)
    try:
        return decode(first.text)
    except msgspec.DecodeError as exc:
        reason = reason_of(exc)
    ctx.log.warning("llm extraction invalid; asking once for a repair", reason=reason)
    await ctx.heartbeat()
    second = await llm.complete(
        repair_messages(messages, first.text, reason), purpose=REPAIR_PURPOSE
    )
    try:
        return decode(second.text)
    except msgspec.DecodeError as exc:
        raise PermanentError(
            f"the model's extraction was invalid twice: {reason_of(exc)} (first attempt: {reason})"
        ) from None


def repair_messages(
    messages: list[dict[str, str]], answer: str, reason: str
) -> list[dict[str, str]]:
    """The repair request: the bad JSON and the error, or the conversation if no JSON came."""
    found = json_part(answer)
    if found is not None:
        return [
            messages[0],
            {
                "role": "user",
                "content": (
                    f"This JSON does not match the schema: {reason}\n"
                    f"Reply with the corrected JSON object only.\n\n{found}"
                ),
            },
        ]
    return [
        *messages,
        {"role": "assistant", "content": answer},
        {
            "role": "user",
            "content": f"That reply was not a JSON object ({reason}). "
            "Reply with the JSON object only.",
        },
    ]
