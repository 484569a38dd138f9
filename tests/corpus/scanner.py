"""A scanner and a fax machine in code: a text PDF in, pictures of its pages out.

Each page of a corpus PDF is rendered (pypdfium2) at the resolution a device
would use, then spoilt the way that device spoils it: a tilt, specks, JPEG
artefacts, a 1-bit threshold, a fax's half vertical resolution, a stamp over a
column, a page fed sideways. The pictures go back into an image-only PDF (or a
TIFF, PNG or JPEG file) with the same truth, every page now an image page.
Everything is seeded: the same bytes on every run.
"""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFilter, ImageFont

from tests.corpus.fonts import font_path

A4_MM = (210.0, 297.0)


@dataclass(frozen=True)
class Device:
    """How one kind of device turns paper into pixels."""

    kind: str
    """The scan class ``saga eval`` reports: ``scan-300``, ``scan-200``, ``fax-200x200``..."""
    dpi: tuple[int, int]
    bilevel: bool = False
    jpeg_quality: int = 0
    """0: stored losslessly (PNG-like Flate, or G4 for 1-bit)."""
    skew: float = 0.0
    specks: int = 300
    blur: float = 0.0


SCAN_300 = Device("scan-300", (300, 300), jpeg_quality=60, skew=1.5, blur=0.6)
SCAN_200 = Device("scan-200", (200, 200), jpeg_quality=45, skew=-3.0, specks=800, blur=0.5)
FAX_FINE = Device("fax-200x200", (200, 200), bilevel=True, skew=2.0, specks=600)
FAX_STANDARD = Device("fax-200x100", (200, 100), bilevel=True, skew=-1.0, specks=400)


def render(pdf: bytes, device: Device) -> list[Image.Image]:
    """Every page of ``pdf`` as ``device`` would read it, in grey (``L``)."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    try:
        pages = []
        for page in doc:
            # render square at the horizontal resolution, then squash the vertical one
            image = page.render(scale=device.dpi[0] / 72, grayscale=True).to_pil().convert("L")
            if device.dpi[1] != device.dpi[0]:
                size = (image.width, round(image.height * device.dpi[1] / device.dpi[0]))
                image = image.resize(size, Image.Resampling.BOX)
            pages.append(image)
        return pages
    finally:
        doc.close()


def spoil(image: Image.Image, device: Device, *, seed: int) -> Image.Image:
    """Blur, specks and a tilt as paper through a scanner gives them; 1-bit for a fax."""
    rng = random.Random(seed)
    if device.blur:
        image = image.filter(ImageFilter.GaussianBlur(device.blur))
    draw = ImageDraw.Draw(image)
    for _ in range(device.specks):
        x, y = rng.randrange(image.width), rng.randrange(image.height)
        size = rng.choice((0, 0, 1, 2))
        draw.ellipse((x, y, x + size, y + size), fill=rng.randrange(0, 140))
    if device.skew:
        image = image.rotate(device.skew, resample=Image.Resampling.BICUBIC, fillcolor=255)
    if device.bilevel:
        image = image.point(lambda v: 255 if v > 150 else 0).convert("1")
    return image


def stamp(image: Image.Image, *, x_mm: float, y_mm: float, dpi: int, seed: int) -> Image.Image:
    """A round "RECEIVED" stamp and a pen stroke over the page at (x, y) mm."""
    rng = random.Random(seed)
    px = dpi / 25.4
    out = image.convert("L")
    draw = ImageDraw.Draw(out)
    cx, cy, r = x_mm * px, y_mm * px, 17 * px
    for width in (3, 1):
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline=110, width=round(width * px / 4))
        r -= 2.5 * px
    font = ImageFont.truetype(str(font_path("sans-bold")), size=round(4 * px))
    draw.text((cx - 13 * px, cy - 6 * px), "RECEIVED", fill=120, font=font)
    draw.text((cx - 11 * px, cy + 1 * px), "05 MAR 2024", fill=120, font=font)
    # a handwriting-like stroke: a wandering line through the column
    points, x, y = [], cx - 25 * px, cy + 12 * px
    for _ in range(40):
        x += rng.uniform(0.5, 1.6) * px
        y += rng.uniform(-1.2, 1.2) * px
        points.append((x, y))
    draw.line(points, fill=60, width=max(2, round(0.5 * px)))
    return out


def rotate_page(image: Image.Image) -> Image.Image:
    """The page fed sideways: a quarter turn, as the scanner stored it."""
    return image.transpose(Image.Transpose.ROTATE_90)


def blank_page(device: Device, *, seed: int) -> Image.Image:
    """Nothing on it but a scanner's specks and a shadow at the edge."""
    width, height = (round(A4_MM[0] / 25.4 * d) for d in device.dpi)
    image = Image.new("L", (width, height), 250)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, width // 60, height), fill=200)
    return spoil(image, device, seed=seed)


def photo(*, seed: int, size: tuple[int, int] = (1200, 900)) -> Image.Image:
    """A photo of no document: soft colour gradients and blobs (a phone pointed at a desk)."""
    rng = random.Random(seed)
    image = Image.new("RGB", size)
    draw = ImageDraw.Draw(image)
    for y in range(size[1]):
        shade = 90 + y * 100 // size[1]
        draw.line(((0, y), (size[0], y)), fill=(shade, shade - 30, shade - 60))
    for _ in range(25):
        x, y, r = rng.randrange(size[0]), rng.randrange(size[1]), rng.randrange(30, 200)
        colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
    return image.filter(ImageFilter.GaussianBlur(8))


def image_pdf(pages: Sequence[Image.Image | None], device: Device, text_pdf: bytes = b"") -> bytes:
    """An A4 PDF of the pictures (each filling its page); ``None`` keeps that page of
    ``text_pdf`` as it is (a mixed document: text pages and scanned pages)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    source = PdfReader(io.BytesIO(text_pdf)) if text_pdf else None
    for index, image in enumerate(pages):
        if image is None:
            assert source is not None
            writer.add_page(source.pages[index])
            continue
        writer.add_page(PdfReader(io.BytesIO(_one_page(image, device))).pages[0])
    writer.add_metadata({"/Producer": "saga corpus scanner"})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _one_page(image: Image.Image, device: Device) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(format="A4", unit="mm")
    pdf.set_creation_date(_FIXED)
    landscape = image.width > image.height * 1.1
    pdf.add_page(orientation="L" if landscape else "P")
    w, h = (A4_MM[1], A4_MM[0]) if landscape else A4_MM
    pdf.image(_encoded(image, device), x=0, y=0, w=w, h=h)
    return bytes(pdf.output())


def _encoded(image: Image.Image, device: Device) -> io.BytesIO:
    buffer = io.BytesIO()
    if device.jpeg_quality and image.mode != "1":
        image.save(buffer, format="JPEG", quality=device.jpeg_quality)
    else:
        image.save(buffer, format="PNG")
    buffer.seek(0)
    return buffer


def tiff(pages: Sequence[Image.Image], device: Device) -> bytes:
    """A multi-page TIFF as a fax server stores it (CCITT G4 for 1-bit pages)."""
    buffer = io.BytesIO()
    first, rest = pages[0], list(pages[1:])
    compression = "group4" if first.mode == "1" else "tiff_lzw"
    first.save(
        buffer,
        format="TIFF",
        save_all=True,
        append_images=rest,
        compression=compression,
        dpi=device.dpi,
    )
    return buffer.getvalue()


def still(image: Image.Image, *, fmt: str, dpi: tuple[int, int] = (200, 200)) -> bytes:
    """One picture as a PNG or JPEG file."""
    buffer = io.BytesIO()
    if fmt == "JPEG":
        image.convert("RGB").save(buffer, format="JPEG", quality=70, dpi=dpi)
    else:
        image.save(buffer, format="PNG", dpi=dpi)
    return buffer.getvalue()


def _fixed() -> object:
    from tests.corpus.sheet import FIXED_DATE

    return FIXED_DATE


_FIXED = _fixed()
