"""The vision path: the pages OCR read, sent to the model as pictures instead of OCR text.

With ``StepConfig.llm_vision`` on and the LLM extractor chosen, the parser fetches
the document again (the router kept its reference, ``RouterOutput.document``), draws
each page the router read by OCR as a small grey JPEG in an extraction process
(``ocr_images``), and the LLM extractor sends that page as an image (a base64 data
URL, litellm's ``image_url`` content part) where it would have sent its text.

What stays the same, by construction:

* **budget**: a picture's tokens (``ocr_images.image_tokens``) take the place of the
  page's text tokens in the request plan; a picture the request cannot hold goes as
  its OCR text, as without vision;
* **cost**: the call goes through the user's LLM port, which meters and caches it like
  any other;
* **grounding**: the model's answer is grounded against the page's *OCR text* (the
  lines the request stands for). A value found there is accepted, and then still
  passes the OCR confidence gate; a value that is not is rejected as ``unverified``
  (``UNVERIFIED``) and the document is flagged for review: a model may read a
  picture better than Tesseract, but nothing it reads is accepted that no OCR
  character backs.

A document gone (or refused by the fetch policy) since the router read it is not an
error here: the pages go as their OCR text, as without vision, and a warning is logged.
"""

from __future__ import annotations

from saga.steps.context import StepContext
from saga.steps.errors import NotFoundError, PolicyError
from saga.steps.models import RouterOutput
from saga.steps.ocr import IMAGE_TYPES
from saga.steps.ocr_images import PageImage

UNVERIFIED = "unverified: the vision model read it on the picture, but the page's OCR text"
"""The start of the reason of a value a vision model read that the OCR text does not hold."""


async def page_images(ctx: StepContext, inp: RouterOutput) -> dict[int, PageImage]:
    """The OCR'd pages as pictures, by page number; {} when vision is off or not needed."""
    if not (ctx.config.llm_vision and inp.ocr_pages and inp.document):
        return {}
    from saga.steps.pdf_process import render_pages

    try:
        document = await ctx.documents.fetch(inp.document)
    except (NotFoundError, PolicyError) as exc:  # gone or refused since the router read it
        ctx.log.warning("vision pages unavailable; sending OCR text", error=type(exc).__name__)
        return {}
    numbers = sorted(page.page for page in inp.ocr_pages)
    image = inp.media_type in IMAGE_TYPES
    images = await render_pages(document.content, numbers, ctx.config, image=image)
    ctx.log.info("pages drawn for the vision model", pages=len(images))
    return {picture.page: picture for picture in images}


def image_content(marker: str, picture: PageImage) -> list[dict[str, object]]:
    """The user message of one page sent as a picture."""
    return [
        {
            "type": "text",
            "text": f"{marker}\n(this page is the image below: a scan; cite this page number)",
        },
        {"type": "image_url", "image_url": {"url": picture.data_url()}},
    ]


def unverified(reason: str) -> str:
    """A grounding refusal restated for a value read from a picture."""
    why = reason.removeprefix("ungrounded: ")
    return f"{UNVERIFIED} does not hold it ({why})"
