"""Pictures of scanned pages for a vision model: small grey JPEGs, and what they cost.

Run in the extraction process (``pdf_process.render_pages``), as OCR is: the same
memory cap, killed with the step. A PDF page is drawn by pypdfium2 at ``VISION_DPI``;
a TIFF, PNG or JPEG page is taken as it is (turned by its EXIF, stretched to square
pixels). Either is shrunk so its longer side is at most ``MAX_SIDE`` pixels and
stored as a grey JPEG: a lab report's 9 pt type stays readable, and a page costs
about a thousand tokens instead of several.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import msgspec
from PIL import Image, ImageOps

from saga.steps.ocr import image_pages

VISION_DPI = 150
MAX_SIDE = 1568
"""Longest side sent: what the common vision models read without shrinking it again."""
JPEG_QUALITY = 70


class PageImage(msgspec.Struct, frozen=True, kw_only=True):
    page: int
    jpeg: bytes
    width: int
    height: int

    @property
    def tokens(self) -> int:
        return image_tokens(self.width, self.height)

    def data_url(self) -> str:
        import base64

        return "data:image/jpeg;base64," + base64.b64encode(self.jpeg).decode("ascii")


def image_tokens(width: int, height: int) -> int:
    """Prompt tokens of a picture as OpenAI's high-detail vision counts them (fit in
    2048 square, shorter side to 768, 170 per 512-pixel tile plus 85); other providers
    count less or about the same, so the budget holds for them too."""
    scale = min(1.0, 2048 / max(width, height, 1))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / max(min(w, h), 1))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def page_jpegs(
    content: bytes, numbers: Sequence[int], *, image: bool, max_pages: int
) -> list[PageImage]:
    """The pages ``numbers`` (1-based) of a PDF or an image document, as grey JPEGs."""
    if image:
        frames = image_pages(content, max_pages=max_pages)
        pictures = {}
        for n in numbers:
            if 1 <= n <= len(frames):
                frame = frames[n - 1]
                x_dpi, y_dpi = frame.dpi
                grey = ImageOps.exif_transpose(frame.image).convert("L")
                if x_dpi != y_dpi and x_dpi > 0 and y_dpi > 0:  # a fax's half height
                    grey = grey.resize((grey.width, round(grey.height * x_dpi / y_dpi)))
                pictures[n] = grey
        return [_jpeg(n, pictures[n]) for n in numbers if n in pictures]
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(content)
    try:
        out = []
        for n in numbers:
            if 1 <= n <= len(document):
                page = document[n - 1]
                try:
                    bitmap = page.render(scale=VISION_DPI / 72, grayscale=True)
                    out.append(_jpeg(n, bitmap.to_pil().convert("L")))
                finally:
                    page.close()
        return out
    finally:
        document.close()


def _jpeg(number: int, grey: Image.Image) -> PageImage:
    grey.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    grey.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return PageImage(page=number, jpeg=buffer.getvalue(), width=grey.width, height=grey.height)
