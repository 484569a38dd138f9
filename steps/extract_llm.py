"""The LLM extractor: the user's model reads the pages, a request per chunk, and
every value it returns is checked against the page it cites.

1. **Plan.** The model's window (``LLM.tokenizer()``: litellm's model info, or
   ``SAGA_LLM_MAX_INPUT_TOKENS``) less the prompt and the room for the answer gives
   the page tokens one request may carry (``saga.steps.chunking``). Pages are packed
   in order; a page over the budget is cut at line ends. A document needing more
   requests than it may have pages (``SAGA_MAX_PAGES``) fails permanently before any
   call is made.
2. **Ask.** Up to ``CONCURRENT_REQUESTS`` requests at once, each answered as JSON
   and checked with msgspec (``saga.steps.llm_prompt``). One invalid answer earns one
   repair request quoting the validation error; a second is a PermanentError naming
   the pages. RetryableError and CircuitOpenError from the port propagate; the
   answers already paid for are cached by the port, so a retry resumes.
3. **Ground and merge.** Each result is looked up on the page it cites, in the lines
   that request carried (``saga.steps.grounding``): found, it gets its provenance;
   not found, it is rejected as ungrounded. Results repeated across requests (the
   same analyte, value, unit and page) are kept once.

Neither page text nor completion text ever reaches an error message or a log line.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
import msgspec
from msgspec.structs import replace

from saga.steps.chunking import (
    MARKER_TOKENS,
    Budget,
    Chunk,
    NoRoomError,
    PagePart,
    page_budget,
    plan_chunks,
)
from saga.steps.context import LLM, StepContext
from saga.steps.errors import PermanentError
from saga.steps.grounding import cross_rejected, crossed, ground
from saga.steps.llm_prompt import (
    PURPOSE,
    REPAIR_PURPOSE,
    Answer,
    decode,
    instructions,
    json_part,
    reason_of,
    repair_messages,
)
from saga.steps.models import Biomarker, Extraction, Rejected
from saga.steps.normalize import name_key
from saga.steps.ocr_images import PageImage
from saga.steps.page_layout import uses_decimal_comma
from saga.steps.vision import image_content, unverified

__all__ = [
    "PURPOSE",
    "REPAIR_PURPOSE",
    "ask",
    "combine",
    "extract_llm",
    "ground_chunk",
    "json_part",
    "merge",
]

CONCURRENT_REQUESTS = 4
"""Requests of one document in flight at once: a long report finishes within the
step's timeout without flooding the user's rate limit."""
MESSAGE_OVERHEAD_TOKENS = 16
"""Tokens a chat request adds around its two messages (roles, separators)."""


def configured_llm(ctx: StepContext) -> LLM:
    """The deployment's model; PermanentError (one sentence) when there is none."""
    if ctx.llm is None:
        raise PermanentError(
            "this deployment has no LLM configured; set SAGA_PARSER=rules or configure a model"
        )
    return ctx.llm


async def extract_llm(
    ctx: StepContext, pages: Sequence[str], images: Mapping[int, PageImage] | None = None
) -> Extraction:
    """Ask the user's model for the extraction, request by request; ground and merge.

    A page in ``images`` (the vision path, ``saga.steps.vision``) is sent as its picture,
    one request each, when the picture fits a request's budget; it is grounded on its
    page text (OCR's) all the same."""
    llm = configured_llm(ctx)
    chunks = await plan(ctx, llm, pages, images or {})
    answers = await _ask_all(ctx, llm, chunks)
    return merge(pages, chunks, answers)


async def plan(
    ctx: StepContext, llm: LLM, pages: Sequence[str], images: Mapping[int, PageImage]
) -> list[Chunk]:
    """The requests the document needs; PermanentError when the model cannot take it."""
    tokenizer = await llm.tokenizer()

    def work() -> tuple[Budget, list[Chunk]]:  # counting tokens of 200 pages: off the loop
        prompt = tokenizer.count(instructions()) + MESSAGE_OVERHEAD_TOKENS
        budget = page_budget(tokenizer.max_input_tokens, tokenizer.max_output_tokens, prompt)
        pictured = {
            n: p for n, p in images.items() if p.tokens + MARKER_TOKENS <= budget.pages
        }  # a picture too large for a request goes as its OCR text
        texts = ["" if n in pictured else text for n, text in enumerate(pages, 1)]
        chunks = plan_chunks(texts, tokenizer.count, budget.pages)
        for n in sorted(pictured):
            lines = pages[n - 1].split("\n")
            part = PagePart(n, 0, len(lines), "", pictured[n].tokens + MARKER_TOKENS)
            chunks.append(Chunk((part,), picture=pictured[n]))
        return budget, sorted(chunks, key=lambda c: c.pages[0])

    try:
        budget, chunks = await anyio.to_thread.run_sync(work)
    except NoRoomError as exc:
        raise PermanentError(
            f"{exc}; set SAGA_LLM_MAX_INPUT_TOKENS to the model's context or choose a larger model"
        ) from None
    limit = ctx.config.max_pages
    if len(chunks) > limit:
        raise PermanentError(
            f"the document needs {len(chunks)} model requests of {budget.pages} tokens of "
            f"pages each, over the limit of {limit} (SAGA_MAX_PAGES); choose a model with a "
            "larger context window"
        )
    ctx.log.info(
        "llm extraction planned", count=len(chunks), page_tokens=budget.pages, pages=len(pages)
    )
    return chunks


async def _ask_all(ctx: StepContext, llm: LLM, chunks: Sequence[Chunk]) -> list[Answer]:
    """Every chunk's answer, in order; the first failure cancels the rest and is raised."""
    answers: list[Answer] = [Answer()] * len(chunks)
    failures: list[Exception] = []
    limiter = anyio.Semaphore(CONCURRENT_REQUESTS)
    async with anyio.create_task_group() as tg:

        async def one(index: int) -> None:
            async with limiter:
                try:
                    answers[index] = await ask(ctx, llm, chunks[index])
                except Exception as exc:  # raised below, as itself, not as a group
                    failures.append(exc)
                    tg.cancel_scope.cancel()

        for index in range(len(chunks)):
            tg.start_soon(one, index)
    if failures:
        raise failures[0]
    return answers


async def ask(ctx: StepContext, llm: LLM, chunk: Chunk) -> Answer:
    """One chunk's answer; one repair; PermanentError after that."""
    content: Any = chunk.message()
    if chunk.picture is not None:
        content = image_content(chunk.parts[0].marker, chunk.picture)
    messages = [
        {"role": "system", "content": instructions()},
        {"role": "user", "content": content},
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
            f"the model's extraction of {chunk.describe()} was invalid twice: "
            f"{reason_of(exc)} (first attempt: {reason})"
        ) from None


def merge(pages: Sequence[str], chunks: Sequence[Chunk], answers: Sequence[Answer]) -> Extraction:
    """The answers grounded on their pages, each result once, in document order."""
    decimal_comma = uses_decimal_comma(pages)
    return combine(
        ground_chunk(pages, chunk, answer, decimal_comma=decimal_comma)
        for chunk, answer in zip(chunks, answers, strict=True)
    )


def ground_chunk(
    pages: Sequence[str], chunk: Chunk, answer: Answer, *, decimal_comma: bool
) -> Extraction:
    """One answer grounded in the lines its request carried; each result once."""
    seen = lines_seen(pages, chunk)
    outcomes = [ground(r, seen, decimal_comma=decimal_comma) for r in answer.biomarkers]
    accepted = [o for o in outcomes if isinstance(o, Biomarker)]
    misplaced = crossed(accepted)
    accepted_in = [result for i, result in enumerate(accepted) if i not in misplaced]
    refused = [o for o in outcomes if isinstance(o, Rejected)]
    if chunk.picture is not None:  # read off a picture: the OCR text did not back it
        refused = [replace(o, reason=unverified(o.reason)) for o in refused]
    refused_in = [*refused, *(cross_rejected(accepted[i]) for i in sorted(misplaced))]
    return combine([Extraction(
        biomarkers=accepted_in,
        diagnoses=list(answer.diagnoses),
        procedures=list(answer.procedures),
        genetics=list(answer.genetics),
        rejected=refused_in,
    )])  # fmt: skip


def combine(parts: Iterable[Extraction]) -> Extraction:
    """Grounded extractions of a document's chunks, in order, as one: a result repeated
    across chunks (the same analyte, value, unit and page; the same diagnosis, procedure
    or finding; the same refusal) is kept once, where it first appeared."""
    found: dict[Hashable, Biomarker] = {}
    rejected: dict[Hashable, Rejected] = {}
    others: dict[str, dict[Hashable, Any]] = {"diagnoses": {}, "procedures": {}, "genetics": {}}
    for part in parts:
        for result in part.biomarkers:
            found.setdefault(_result_key(result), result)
        for outcome in part.rejected:
            why = (outcome.name.casefold(), outcome.value_text, outcome.unit, outcome.reason)
            rejected.setdefault(why, outcome)
        for diagnosis in part.diagnoses:
            key = (_fold(diagnosis.name), _fold(diagnosis.code))
            others["diagnoses"].setdefault(key, diagnosis)
        for procedure in part.procedures:
            key = (_fold(procedure.name), _fold(procedure.date))
            others["procedures"].setdefault(key, procedure)
        for finding in part.genetics:
            key = (_fold(finding.gene), _fold(finding.variant))
            others["genetics"].setdefault(key, finding)
    return Extraction(
        biomarkers=list(found.values()),
        diagnoses=list(others["diagnoses"].values()),
        procedures=list(others["procedures"].values()),
        genetics=list(others["genetics"].values()),
        rejected=list(rejected.values()),
    )


def lines_seen(pages: Sequence[str], chunk: Chunk) -> dict[int, list[str]]:
    """Page number -> the lines of it this chunk carried (a whole page, or a part)."""
    seen: dict[int, list[str]] = {}
    for part in chunk.parts:
        lines = pages[part.page - 1].split("\n")[part.first : part.end]
        seen.setdefault(part.page, []).extend(lines)
    return seen


def _result_key(result: Biomarker) -> Hashable:
    """The same analyte, value, unit and page: one result."""
    value: Hashable = result.value if result.value is not None else _fold(result.value_text)
    value = (result.comparator, value)
    page = result.provenance.page if result.provenance else 0
    return (name_key(result.name) or _fold(result.name), value, _fold(result.unit), page)


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()
