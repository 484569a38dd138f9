"""Router: fetch the record's document, split it into page texts, stage the pages blob.

The reference comes from the saga's input (an explicit ``--document``) or, in
production, from ``StepConfig.document_source`` with ``{record_id}`` filled in.
Every limit is checked here as well as in the document source, because the
source is a port and a test or another adapter may not enforce them. PDFs are
read in an extraction process (``pdf_process``) that the step's timeout kills;
pages of a PDF that give no text (scans) are read by OCR in the same process
(``steps/ocr.py``), and so are TIFF, PNG and JPEG documents; what OCR read is
listed in ``ocr_pages`` with its confidence for the parser's gate, and a page
that still has no text (blank, a photo) in ``textless_pages``.
"""

from __future__ import annotations

from urllib.parse import quote

from saga.steps.context import StepContext
from saga.steps.errors import InvalidInputError, PayloadTooLargeError
from saga.steps.models import OcrPage, RouterInput, RouterOutput
from saga.steps.ocr import image_media_type
from saga.steps.pages import PDF_MEDIA_TYPE, is_pdf, text_pages
from saga.steps.pdf_process import extract_pdf

PLACEHOLDER = "{record_id}"


def resolve_reference(document: str, template: str, record_id: str) -> str:
    """The explicit document wins; else the template with the record id filled in."""
    if document:
        return document
    if not template:
        raise InvalidInputError(
            "the saga names no document and SAGA_DOCUMENT_SOURCE is not set; "
            "pass --document or configure a source template"
        )
    if PLACEHOLDER not in template:
        raise InvalidInputError("SAGA_DOCUMENT_SOURCE has no {record_id} placeholder")
    # ids are validated upstream, but quoting keeps a URL template well-formed regardless
    is_url = template.startswith(("http://", "https://"))
    value = quote(record_id, safe="") if is_url else record_id
    if not is_url and ("/" in record_id or record_id.startswith(".")):
        raise InvalidInputError("the record id cannot be used inside a path template")
    # str.replace, not str.format: other braces in a URL must stay as they are
    return template.replace(PLACEHOLDER, value)


async def route(ctx: StepContext, inp: RouterInput) -> RouterOutput:
    """Fetch, split and check the document; stage its pages for the parser."""
    limits = ctx.config
    ref = resolve_reference(inp.document, limits.document_source, ctx.record_id)
    document = await ctx.documents.fetch(ref)
    size = len(document.content)
    if size > limits.max_document_bytes:
        raise PayloadTooLargeError("document size in bytes", size, limits.max_document_bytes)
    textless: list[int] = []
    ocr: list[OcrPage] = []
    # with OCR off a picture is refused as any unsupported media type was
    image_type = image_media_type(document.content, document.media_type) if limits.ocr else ""
    if is_pdf(document) or image_type:
        # a process of its own: CPU-bound, and the step's deadline must be able to stop it
        extracted = await extract_pdf(document.content, limits, image=bool(image_type))
        pages, textless, ocr = extracted.pages, extracted.textless, extracted.ocr
    else:
        pages = text_pages(document, max_pages=limits.max_pages)
    for number, text in enumerate(pages, start=1):
        if len(text) > limits.max_chars_per_page:
            raise PayloadTooLargeError(
                f"character count of page {number}", len(text), limits.max_chars_per_page
            )
    media_type = image_type or (PDF_MEDIA_TYPE if is_pdf(document) else "text/plain")
    ctx.store_pages(pages)
    ctx.log.info(  # no document name: it is often a patient's name
        "document routed",
        media_type=media_type,
        page_count=len(pages),
        textless_pages=len(textless),
        ocr_pages=len(ocr),
        ocr_cpu_s=round(sum(page.cpu_s for page in ocr), 3),
        size_bytes=size,
    )
    return RouterOutput(
        document_name=document.name,
        media_type=media_type,
        page_count=len(pages),
        textless_pages=textless,
        ocr_pages=ocr,
        document=ref if ocr and limits.llm_vision else "",
    )
