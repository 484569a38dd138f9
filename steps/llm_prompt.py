"""What the LLM extractor asks and what it accepts back: the prompt, the answer's
schema, decoding and the repair request.

The model answers ``Answer`` (its JSON Schema is in the prompt): the results it
read, each with the page it cites and the line it read the value from, quoted.
The answer is decoded with ``msgspec.json.decode(..., type=Answer)``; nothing of
it is trusted until ``saga.steps.grounding`` finds the value on the cited page.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Annotated, Any

import msgspec

from saga.steps.models import Diagnosis, Flag, GeneticFinding, Name, Procedure

PURPOSE = "extract"
REPAIR_PURPOSE = "extract-repair"
MAX_REASON_CHARS = 200
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


class LabResult(msgspec.Struct, frozen=True, kw_only=True):
    """One result as the model read it, with the page and the line it cites."""

    name: Name
    value: float | None = None
    value_text: str = ""
    comparator: Annotated[str, msgspec.Meta(max_length=2)] = ""
    unit: str = ""
    reference_low: float | None = None
    reference_high: float | None = None
    reference_text: str = ""
    flag: Flag = Flag.UNKNOWN
    page: Annotated[int, msgspec.Meta(ge=1)]
    line: str = ""


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """The model's answer for the pages of one request."""

    biomarkers: list[LabResult] = []
    diagnoses: list[Diagnosis] = []
    procedures: list[Procedure] = []
    genetics: list[GeneticFinding] = []


_INSTRUCTIONS = """\
You extract structured data from pages of a medical lab report.
Reply with exactly one JSON object and nothing else, valid against this JSON Schema:
{schema}
- biomarkers: every lab result on these pages. value is the result as a number; for a
  censored result such as "<0.3" value is 0.3 and comparator "<"; value is null for a
  result in words ("Negative", "NON-REACTIVE"). value_text is the result exactly as
  written. reference_low/reference_high are the range bounds (null when absent);
  reference_text is the range as written; flag is "high", "low", "normal" or "" when
  unknown.
- page is the N of the "=== page N ===" marker the result stands under (a marker
  "(part 2 of 3)" is still page N); line is the page's line holding the value, copied
  exactly, character for character.
- diagnoses (with the ICD-10 code if written), procedures (with the date as written),
  genetics (gene symbol, variant, interpretation).
- Copy names as written. Use "" and [] for what the pages do not state. Invent nothing."""


@functools.cache
def instructions() -> str:
    """The system prompt with the schema; built once per process."""
    schema = json.dumps(msgspec.json.schema(Answer), separators=(",", ":"))
    return _INSTRUCTIONS.format(schema=schema)


def json_part(text: str) -> str | None:
    """The outermost ``{...}`` of an answer (models wrap JSON in fences or prose)."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else None


def decode(text: str) -> Answer:
    """The answer as an ``Answer``; raises msgspec.DecodeError (or ValidationError)."""
    return msgspec.json.decode(json_part(text) or text, type=Answer)


def reason_of(error: Exception) -> str:
    """A validation error with quoted values blanked: they may come from the pages."""
    return _QUOTED.sub("'…'", str(error))[:MAX_REASON_CHARS]


def repair_messages(
    messages: list[dict[str, Any]], answer: str, reason: str
) -> list[dict[str, Any]]:
    """The repair request: the bad JSON and the error, or the conversation if no JSON came.

    A schema slip needs no re-reading, and pages are the costly part; an answer with
    no JSON at all continues the conversation, so the pages are in it once."""
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
