"""Real PDFs that trip text extraction: bombs, rotated text, text inside forms, faxes.

Made with fpdf2 where it can draw them; pypdf's writer re-wires what fpdf2 cannot
(pages sharing one content stream, a page drawn through a form XObject).
"""

from __future__ import annotations

import io

from fpdf import FPDF
from PIL import Image
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    DecodedStreamObject,
    DictionaryObject,
    FloatObject,
    NameObject,
)

from tests.steps.pdfgen import FIXED_DATE

ROW = "Hemoglobin  13.2  g/dL  12.0 - 15.5"


def _pdf() -> FPDF:
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_font("Helvetica", size=10)
    return pdf


def rotated_pdf(pages: int = 15) -> bytes:
    """Every line drawn rotated (a landscape report printed sideways): pypdf's layout mode
    returns "" for each page without raising; plain mode reads it."""
    pdf = _pdf()
    for page in range(pages):
        pdf.add_page()
        with pdf.rotation(90, x=105, y=150):
            for row in range(12):
                pdf.text(40, 60 + row * 7, f"Analyte {page}-{row}  {row + 1}.5  mg/dL  1.0 - 9.0")
    return bytes(pdf.output())


def shared_stream_pdf(pages: int, stream_bytes: int) -> bytes:
    """``pages`` pages that all draw one deflated content stream of ``stream_bytes`` bytes:
    a few KB on disk, ``pages * stream_bytes`` to extract (a decompression bomb)."""
    line = f"BT /F1 10 Tf 50 700 Td ({ROW}) Tj ET\n".encode()
    stream = DecodedStreamObject()
    stream.set_data(line * max(stream_bytes // len(line), 1))
    writer = PdfWriter()
    content = writer._add_object(stream.flate_encode())
    font = writer._add_object(_helvetica())
    for _ in range(pages):
        page = writer.add_blank_page(595, 842)
        page[NameObject("/Contents")] = content
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
    return _written(writer)


def form_pdf(rows: list[str], header: str = "") -> bytes:
    """One page whose ``rows`` live in a form XObject that the page draws (as stamped or
    merged PDFs do); ``header`` is drawn by the page itself. Layout mode skips forms."""
    pdf = _pdf()
    pdf.add_page()
    for i, row in enumerate(rows):
        pdf.text(20, 30 + i * 7, row)
    source = PdfReader(io.BytesIO(bytes(pdf.output()))).pages[0]
    writer = PdfWriter()
    form = DecodedStreamObject()
    form.set_data(source.get_contents().get_data())  # type: ignore[union-attr]
    form.update(
        {
            NameObject("/Type"): NameObject("/XObject"),
            NameObject("/Subtype"): NameObject("/Form"),
            NameObject("/BBox"): ArrayObject([FloatObject(v) for v in (0, 0, 595, 842)]),
            NameObject("/Resources"): source["/Resources"].get_object().clone(writer),
        }
    )
    form_ref = writer._add_object(form.flate_encode())
    page = writer.add_blank_page(595, 842)
    top = f"BT /F1 10 Tf 20 820 Td ({header}) Tj ET\n" if header else ""
    contents = DecodedStreamObject()
    contents.set_data(f"{top}q /Fm0 Do Q\n".encode())
    page[NameObject("/Contents")] = writer._add_object(contents)
    page[NameObject("/Resources")] = DictionaryObject(
        {
            NameObject("/XObject"): DictionaryObject({NameObject("/Fm0"): form_ref}),
            NameObject("/Font"): DictionaryObject(
                {NameObject("/F1"): writer._add_object(_helvetica())}
            ),
        }
    )
    return _written(writer)


def fax_pdf(scanned_pages: int = 2, *, cover: bool = True) -> bytes:
    """A text fax cover page followed by pages that are only a scanned image."""
    pdf = _pdf()
    if cover:
        pdf.add_page()
        pdf.text(20, 30, "FAX COVER  To: Records  From: City Lab  Pages: 3")
    image = Image.new("L", (200, 280), color=235)
    for row in range(20, 260, 12):
        image.paste(60, (20, row, 180, row + 4))  # grey bars where text was printed
    for _ in range(scanned_pages):
        pdf.add_page()
        pdf.image(image, x=10, y=10, w=190)
    return bytes(pdf.output())


def _helvetica() -> DictionaryObject:
    return DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )


def _written(writer: PdfWriter) -> bytes:
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
