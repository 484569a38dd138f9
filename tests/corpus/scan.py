"""Image-only pages: text drawn into a picture, as a scanner or a fax machine returns it.

The page carries one JPEG and no text layer, so a text extractor sees nothing on
it. A slight tilt and a few specks (from a fixed seed) make it look scanned;
the output is the same bytes on every run.
"""

from __future__ import annotations

import io
import random
from collections.abc import Sequence

from PIL import Image, ImageDraw, ImageFont

from tests.corpus.fonts import font_path
from tests.corpus.sheet import Sheet

DPI = 120
A4_MM = (210.0, 297.0)
MM = DPI / 25.4

Cells = Sequence[tuple[float, str]]
"""One line of a scanned page: (x in mm, text) pieces."""


def scan_page(
    sheet: Sheet,
    lines: Sequence[Cells],
    *,
    seed: int,
    top: float = 20,
    line_h: float = 6.5,
    tilt: float = 0.5,
) -> int:
    """Add a page that is only a picture of ``lines``; returns its 1-based number."""
    width, height = round(A4_MM[0] * MM), round(A4_MM[1] * MM)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(font_path("mono")), size=round(3.4 * MM))
    for row, cells in enumerate(lines):
        y = (top + row * line_h) * MM
        for x, text in cells:
            draw.text((x * MM, y), text, fill=30, font=font)
    rng = random.Random(seed)
    for _ in range(300):
        x, y = rng.randrange(width), rng.randrange(height)
        draw.point((x, y), fill=rng.randrange(0, 120))
    image = image.rotate(tilt, resample=Image.Resampling.BICUBIC, fillcolor=255)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=70)
    sheet.pdf.add_page()
    sheet.pdf.image(buffer, x=0, y=0, w=A4_MM[0], h=A4_MM[1])
    sheet.image_pages.append(sheet.page)
    return sheet.page
