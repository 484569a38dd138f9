"""The vision path: OCR'd pages go to the model as pictures (litellm image input, through
a real local OpenAI-compatible server), metered like any call, and a value the model
reads is accepted only if the page's OCR text holds it, else rejected as unverified
and the document flagged."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from PIL import Image, ImageDraw

from saga.adapters.billing import Secret, StaticKey
from saga.adapters.llm import CostMeter, LiteLLMClient, LLMConfig
from saga.state.keys import Keys
from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.context import Document
from saga.steps.models import OcrPage, RouterOutput
from saga.steps.ocr_images import image_tokens
from saga.steps.parser import parse
from saga.steps.testing import MemoryDocuments, make_context
from tests.adapters.support import Stub, chat_reply, scripted, serve
from tests.corpus.scanner import SCAN_200, image_pdf

pytestmark = pytest.mark.anyio

OCR_TEXT = "Sodium  141  mmol/L  135-145\nPotassium  4.2  mmol/L  3.5-5.1"
"""What OCR read on the page (the vision model is told nothing of it)."""
ANSWER = json.dumps(
    {
        "biomarkers": [
            {"name": "Sodium", "value": 141, "value_text": "141", "unit": "mmol/L", "page": 1},
            # the model "reads" 5.9 where OCR read 4.2: no OCR character backs it
            {"name": "Potassium", "value": 5.9, "value_text": "5.9", "unit": "mmol/L", "page": 1},
        ]
    }
)


def _picture() -> Image.Image:
    image = Image.new("L", (1654, 2339), 255)  # A4 at 200 dpi
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(OCR_TEXT.split("\n")):
        draw.text((150, 200 + row * 60), line.replace("  ", "    "), fill=0)
    return image


def _png() -> bytes:
    buffer = io.BytesIO()
    _picture().save(buffer, format="PNG", dpi=(200, 200))
    return buffer.getvalue()


def _document(kind: str) -> Document:
    if kind == "png":
        return Document("scan.png", "image/png", _png())
    return Document("scan.pdf", "application/pdf", image_pdf([_picture()], SCAN_200))


def _routed(kind: str) -> RouterOutput:
    confidence = "\n".join(
        "".join(" " if c == " " else "9" for c in line) for line in OCR_TEXT.split("\n")
    )
    return RouterOutput(
        document_name=f"scan.{kind}",
        media_type="image/png" if kind == "png" else "application/pdf",
        page_count=1,
        ocr_pages=[OcrPage(page=1, confidence=confidence, mean_confidence=95, words=8)],
        document=f"scan.{kind}",
    )


def _llm(redis: Any, keys: Keys, stub: Stub, **config: Any) -> LiteLLMClient:
    return LiteLLMClient(
        LLMConfig(model="openai/gpt-4o-mini", api_base=f"{stub.url}/v1", timeout_s=10, **config),
        redis=redis,
        keys=keys,
        record_id="rec-vision",
        step="parser",
        api_key=StaticKey(Secret("sk-user")),
        meter=CostMeter(),
    )


def _user_content(stub: Stub) -> Any:
    [request] = stub.requests
    return request.body["messages"][1]["content"]


@pytest.mark.parametrize("kind", ["png", "pdf"])
async def test_a_scanned_page_goes_as_a_picture_and_an_ungrounded_value_is_unverified(
    redis: Any, keys: Keys, kind: str
) -> None:
    """The page goes as a JPEG data URL (not its OCR text); Sodium (in the OCR text) is
    accepted, Potassium 5.9 (not in it) is rejected as unverified and the saga flagged;
    the call is metered on the user's attempt."""
    config = StepConfig(extractor=ExtractorKind.LLM, llm_vision=True)
    documents = MemoryDocuments({f"scan.{kind}": _document(kind)})
    with serve(scripted(then=chat_reply(ANSWER, tokens=(1200, 80)))) as stub:
        llm = _llm(redis, keys, stub)
        ctx = make_context(
            step="parser",
            pages=[OCR_TEXT],
            config=config,
            llm=llm,
            documents=documents,
            record_id="rec-vision",
        )
        out = await parse(ctx, _routed(kind))
    content = _user_content(stub)
    assert isinstance(content, list), "the page was sent as text"
    [text_part, image_part] = content
    assert "page 1" in text_part["text"] and "Sodium" not in text_part["text"]
    url = image_part["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    picture = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert picture.format == "JPEG" and max(picture.size) <= 1568
    accepted = {b.name: b for b in out.extraction.biomarkers}
    assert set(accepted) == {"Sodium"} and accepted["Sodium"].value == 141
    assert accepted["Sodium"].provenance is not None
    assert accepted["Sodium"].provenance.ocr_confidence == 90
    [refused] = [r for r in out.extraction.rejected if r.name == "Potassium"]
    assert refused.reason.startswith("unverified:"), refused.reason
    assert out.review, "a document with an unverified value must be flagged"
    assert documents.fetched == [f"scan.{kind}"]
    assert llm.meter.calls == 1 and llm.meter.total > 0


async def test_a_picture_over_the_request_budget_goes_as_its_ocr_text(
    redis: Any, keys: Keys
) -> None:
    """With a window too small for the page's picture but not for its text, the request
    carries the OCR text, as without vision: the budget binds pictures too."""
    config = StepConfig(extractor=ExtractorKind.LLM, llm_vision=True)
    documents = MemoryDocuments({"scan.png": _document("png")})
    picture_tokens = image_tokens(1109, 1568)  # the A4 page shrunk to MAX_SIDE
    assert picture_tokens > 600
    with serve(scripted(then=chat_reply(ANSWER))) as stub:
        llm = _llm(redis, keys, stub, max_input_tokens=4000, max_tokens=1500)
        ctx = make_context(
            step="parser", pages=[OCR_TEXT], config=config, llm=llm, documents=documents
        )
        out = await parse(ctx, _routed("png"))
    content = _user_content(stub)
    assert isinstance(content, str) and "Sodium  141" in content
    assert {b.name for b in out.extraction.biomarkers} == {"Sodium"}
    [refused] = [r for r in out.extraction.rejected if r.name == "Potassium"]
    assert refused.reason.startswith("ungrounded:")


async def test_vision_off_sends_the_ocr_text_and_fetches_nothing(redis: Any, keys: Keys) -> None:
    """Without SAGA_LLM_VISION the OCR text is the page, and the document is not fetched."""
    documents = MemoryDocuments({"scan.png": _document("png")})
    with serve(scripted(then=chat_reply(ANSWER))) as stub:
        llm = _llm(redis, keys, stub)
        ctx = make_context(
            step="parser",
            pages=[OCR_TEXT],
            config=StepConfig(extractor=ExtractorKind.LLM),
            llm=llm,
            documents=documents,
        )
        await parse(ctx, _routed("png"))
    assert isinstance(_user_content(stub), str) and documents.fetched == []


def test_image_tokens_follow_the_tile_count() -> None:
    """A 512x512 picture is one tile (255 tokens); an A4 page at 1568 px is 6 tiles."""
    assert image_tokens(512, 512) == 85 + 170
    assert image_tokens(1109, 1568) == 85 + 170 * 6


async def test_a_document_gone_since_the_router_sends_the_ocr_text(redis: Any, keys: Keys) -> None:
    """The reference no longer resolves: no failure, the page goes as its OCR text."""
    config = StepConfig(extractor=ExtractorKind.LLM, llm_vision=True)
    documents = MemoryDocuments({})
    with serve(scripted(then=chat_reply(ANSWER))) as stub:
        llm = _llm(redis, keys, stub)
        ctx = make_context(
            step="parser", pages=[OCR_TEXT], config=config, llm=llm, documents=documents
        )
        out = await parse(ctx, _routed("png"))
    assert isinstance(_user_content(stub), str) and documents.fetched == ["scan.png"]
    assert {b.name for b in out.extraction.biomarkers} == {"Sodium"}
