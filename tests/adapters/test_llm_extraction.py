"""The LLM extractor through litellm and a local OpenAI-compatible server that reads the
pages it is sent: requests per budget, grounding, and the answer cache by epoch."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import litellm
import pytest

from saga.adapters.billing import Secret, StaticKey
from saga.adapters.llm import CostMeter, LiteLLMClient, LLMConfig
from saga.state.keys import Keys
from saga.steps.chunking import MARKER_TOKENS, page_budget
from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.errors import PermanentError
from saga.steps.extract_llm import MESSAGE_OVERHEAD_TOKENS, extract_llm
from saga.steps.llm_prompt import instructions
from saga.steps.testing import make_context

from .support import Reply, Request, Stub, chat_reply, serve

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"
_MARKER = re.compile(r"^=== page (\d+)(?: \(part \d+ of \d+\))? ===$", re.MULTILINE)
_GLUCOSE = re.compile(r"^Glucose  (\d+) mg/dL.*$", re.MULTILINE)


def page(number: int) -> str:
    comments = [f"Comment {i}: specimen received in good condition, analysed same day."
                for i in range(6)]  # fmt: skip
    return "\n".join([f"Lab report  page {number} of 200",
                      f"Glucose  {80 + number % 20} mg/dL  70 - 99", *comments])  # fmt: skip


def pages_sent(request: Request) -> dict[int, str]:
    """Page number -> the text under its marker in the request's user message."""
    text = request.body["messages"][-1]["content"]
    marks = list(_MARKER.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {
        int(m.group(1)): text[m.end() : end].strip() for m, end in zip(marks, ends, strict=True)
    }


def reading_model(request: Request) -> Reply:
    """A model that reports every Glucose line it is shown, citing page and line."""
    found = []
    for number, text in pages_sent(request).items():
        for match in _GLUCOSE.finditer(text):
            found.append({"name": "Glucose", "value": float(match.group(1)), "unit": "mg/dL",
                          "page": number, "line": match.group(0)})  # fmt: skip
    answer = json.dumps({"biomarkers": found})
    sent = request.body["messages"][-1]["content"]
    return chat_reply(answer, model="gpt-4o-mini", tokens=(len(sent) // 4, len(answer) // 4))


def llm_for(redis: Any, keys: Keys, stub: Stub, *, epoch: int = 1, window: int = 0) -> Any:
    config = LLMConfig(model=MODEL, api_base=f"{stub.url}/v1", max_input_tokens=window)
    return LiteLLMClient(config, redis=redis, keys=keys, record_id="rec-1", step="parser",
                         api_key=StaticKey(Secret("sk-test")), meter=CostMeter(),
                         epoch=epoch)  # fmt: skip


def context(llm: Any, pages: list[str], epoch: int = 1) -> Any:
    config = StepConfig(extractor=ExtractorKind.LLM)
    return make_context(step="parser", pages=pages, config=config, llm=llm, epoch=epoch)


async def test_two_hundred_pages_go_in_as_many_requests_as_the_budget_needs(
    redis: Any, keys: Keys
) -> None:
    """A 6,000-token window: 8 pages a request, 25 requests, every page once, each request
    within the budget, and every value grounded on its page."""
    pages = [page(n) for n in range(1, 201)]
    with serve(reading_model) as stub:
        llm = llm_for(redis, keys, stub, window=6_000)
        extraction = await extract_llm(context(llm, pages), pages)
    count = (await llm.tokenizer()).count
    prompt = count(instructions()) + MESSAGE_OVERHEAD_TOKENS
    budget = page_budget(6_000, 16_384, prompt).pages
    per_request = budget // (count(pages[0]) + MARKER_TOKENS)
    assert per_request == 8 and len(stub.requests) == math.ceil(200 / per_request) == 25
    sent = [pages_sent(r) for r in stub.requests]
    assert sorted(n for s in sent for n in s) == list(range(1, 201))
    assert all(count(r.body["messages"][-1]["content"]) <= budget for r in stub.requests)
    assert len(extraction.biomarkers) == 200 and extraction.rejected == []
    assert [b.provenance.page for b in extraction.biomarkers] == list(range(1, 201))
    assert all(b.value == 80 + b.provenance.page % 20 for b in extraction.biomarkers)
    assert llm.meter.calls == 25 and llm.meter.prompt_tokens > 0


async def test_a_retry_in_a_new_epoch_asks_the_fixed_model_again(redis: Any, keys: Keys) -> None:
    """A bad answer dead-letters; re-running in the same epoch (a crash) replays the paid
    answers at no cost; after the model is fixed, a retry (epoch 2) calls it again."""
    pages = [page(1), page(2)]
    fixed = False

    def model(request: Request) -> Reply:
        return reading_model(request) if fixed else chat_reply("I cannot read this.")

    with serve(model) as stub:
        with pytest.raises(PermanentError, match="invalid twice"):
            await extract_llm(context(llm_for(redis, keys, stub), pages), pages)
        assert len(stub.requests) == 2  # the request and its repair
        fixed = True
        again = llm_for(redis, keys, stub)  # a re-execution within epoch 1
        with pytest.raises(PermanentError, match="invalid twice"):
            await extract_llm(context(again, pages), pages)
        assert len(stub.requests) == 2 and again.meter.cached_calls == 2
        retried = llm_for(redis, keys, stub, epoch=2)  # saga retry --step parser
        extraction = await extract_llm(context(retried, pages, epoch=2), pages)
    assert len(stub.requests) == 3 and retried.meter.calls == 1
    assert [b.value for b in extraction.biomarkers] == [81.0, 82.0]


async def test_the_window_comes_from_litellm_unless_overridden(redis: Any, keys: Keys) -> None:
    """gpt-4o-mini's window from litellm's model map; the setting overrides it; an unknown
    model is assumed small (8,192)."""
    with serve(reading_model) as stub:
        known = await llm_for(redis, keys, stub).tokenizer()
        override = await llm_for(redis, keys, stub, window=6_000).tokenizer()
    info = litellm.get_model_info(MODEL)
    assert (known.max_input_tokens, known.max_output_tokens) == (
        info["max_input_tokens"], info["max_output_tokens"])  # fmt: skip
    assert override.max_input_tokens == 6_000
    assert known.count("Glucose  95 mg/dL") == litellm.token_counter(
        model=MODEL, text="Glucose  95 mg/dL"
    )
    unknown = LiteLLMClient(LLMConfig(model="openai/no-such-model-xyz"), redis=redis, keys=keys,
                            record_id="r", step="parser", api_key=StaticKey(Secret("k")),
                            meter=CostMeter())  # fmt: skip
    assert (await unknown.tokenizer()).max_input_tokens == 8_192
