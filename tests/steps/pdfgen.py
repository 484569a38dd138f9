"""Synthetic lab reports as data, rendered to real PDFs with fpdf2 (a dev-only dependency).

A report is a list of pages, a page a list of blocks. Each block knows how to
draw itself and what the rules extractor must find in it, so the expected
extraction is written next to the data, never computed by the extractor.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from dataclasses import dataclass, field

from fpdf import FPDF

from saga.steps.models import (
    Biomarker,
    Diagnosis,
    Extraction,
    Flag,
    GeneticFinding,
    Procedure,
)

FIXED_DATE = dt.datetime(2024, 3, 5, tzinfo=dt.UTC)
ALIGNED_WIDTHS = (64, 24, 26, 34, 16)
LAB_HEADER = ("Test", "Result", "Unit", "Reference", "Flag")


@dataclass(frozen=True)
class Lab:
    """One lab row as printed, with the truth the extractor must produce for it."""

    name: str
    result: str
    unit: str = ""
    ref: str = ""
    low: float | None = None
    high: float | None = None
    printed_flag: str = ""
    flag: Flag = Flag.UNKNOWN

    def expected(self) -> Biomarker:
        number = re.fullmatch(r"(?P<cmp>[<>]=?)?(?P<num>-?[\d,]+(?:\.\d+)?)", self.result)
        return Biomarker(
            name=self.name,
            value=float(number.group("num").replace(",", "")) if number else None,
            value_text=self.result,
            comparator=(number.group("cmp") or "") if number else "",
            unit=self.unit,
            reference_low=self.low,
            reference_high=self.high,
            reference_text=self.ref,
            flag=self.flag,
        )


@dataclass(frozen=True)
class Table:
    """Lab rows in a layout: ``aligned`` (cells), ``pipe``, ``colon`` or ``spaces``."""

    layout: str
    rows: tuple[Lab, ...]
    header: tuple[str, ...] | None = LAB_HEADER


@dataclass(frozen=True)
class Items:
    """A section heading and its list items: (printed line, expected finding)."""

    heading: str
    items: tuple[tuple[str, Diagnosis | Procedure | GeneticFinding], ...]


@dataclass(frozen=True)
class GeneTable:
    """A ``Gene | Variant | Interpretation`` pipe table."""

    rows: tuple[GeneticFinding, ...]


@dataclass(frozen=True)
class Text:
    """Lines the extractor must ignore (letterheads, headings, comments)."""

    lines: tuple[str, ...]


Block = Table | Items | GeneTable | Text


@dataclass(frozen=True)
class Report:
    """A synthetic report: its file stem, ids and pages of blocks."""

    name: str
    record_id: str
    user_id: str
    title: str
    pages: tuple[tuple[Block, ...], ...] = field(default_factory=tuple)


def expected_extraction(report: Report) -> Extraction:
    """What the rules extractor must find in ``report``, from the data alone."""
    found: dict[str, list] = {"biomarkers": [], "diagnoses": [], "procedures": [], "genetics": []}
    kinds = {Diagnosis: "diagnoses", Procedure: "procedures", GeneticFinding: "genetics"}
    for page in report.pages:
        for block in page:
            if isinstance(block, Table):
                found["biomarkers"].extend(row.expected() for row in block.rows)
            elif isinstance(block, Items):
                for _, item in block.items:
                    found[kinds[type(item)]].append(item)
            elif isinstance(block, GeneTable):
                found["genetics"].extend(block.rows)
    return Extraction(**found)


def render(report: Report) -> bytes:
    """The report as PDF bytes (deterministic: fixed creation date)."""
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_auto_page_break(auto=False)
    for number, page in enumerate(report.pages, start=1):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 13)
        _line(pdf, report.title, height=9)
        pdf.set_font("Helvetica", size=10)
        _line(pdf, "Patient: SYNTHETIC, Test Person   DOB: 1970-01-01   Sex: F")
        _line(pdf, "Collected: 2024-03-04   Reported: 2024-03-05")
        for block in page:
            _draw(pdf, block)
        pdf.set_y(-20)
        _line(pdf, f"Page {number} of {len(report.pages)}")
    return bytes(pdf.output())


def _line(pdf: FPDF, text: str, height: float = 7) -> None:
    pdf.cell(0, height, text, new_x="LMARGIN", new_y="NEXT")


def _draw(pdf: FPDF, block: Block) -> None:
    if isinstance(block, Text):
        for text in block.lines:
            _line(pdf, text)
    elif isinstance(block, Items):
        pdf.set_font("Helvetica", "B", 11)
        _line(pdf, block.heading)
        pdf.set_font("Helvetica", size=10)
        for printed, _ in block.items:
            _line(pdf, printed)
    elif isinstance(block, GeneTable):
        _line(pdf, "Gene | Variant | Interpretation")
        for gene in block.rows:
            _line(pdf, f"{gene.gene} | {gene.variant} | {gene.interpretation}")
    else:
        _draw_table(pdf, block)


def _draw_table(pdf: FPDF, table: Table) -> None:
    if table.layout == "aligned":
        for cells in ([table.header] if table.header else []) + [_cells(r) for r in table.rows]:
            for width, cell in zip(ALIGNED_WIDTHS, cells, strict=False):
                pdf.cell(width, 6, cell)
            pdf.ln(6)
    elif table.layout == "pipe":
        if table.header:
            _line(pdf, " | ".join(table.header))
        for row in table.rows:
            _line(pdf, " | ".join(_cells(row)))
    elif table.layout == "colon":
        for row in table.rows:
            ref = f"(ref {row.ref})" if row.ref else ""
            _line(
                pdf,
                " ".join(
                    p for p in (f"{row.name}:", row.result, row.unit, ref, row.printed_flag) if p
                ),
            )
    else:  # "spaces": one space between fields, as plain-text exports print them
        for row in table.rows:
            _line(pdf, " ".join(p for p in _cells(row) if p))


def _cells(row: Lab) -> tuple[str, ...]:
    return (row.name, row.result, row.unit, row.ref, row.printed_flag)


def make_pdf(pages: list[list[str]]) -> bytes:
    """A text PDF, one list of lines per page (for tests that build their own documents)."""
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_font("Helvetica", size=10)
    for lines in pages:
        pdf.add_page()
        for line in lines:
            pdf.cell(0, 7, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def empty_pdf() -> bytes:
    """A well-formed PDF with zero pages."""
    from pypdf import PdfWriter

    buffer = io.BytesIO()
    PdfWriter().write(buffer)
    return buffer.getvalue()


DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
Row = str | tuple[tuple[float, str], ...]
"""A printed line: plain text, or cells of (width in mm, text) side by side."""


def layout_pdf(pages: list[list[Row]]) -> bytes:
    """A text PDF in DejaVu Sans (arrows, minus sign, umlauts): lines, or cells at fixed widths."""
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_auto_page_break(auto=False)
    pdf.add_font("DejaVu", fname=DEJAVU)
    pdf.set_font("DejaVu", size=9)
    for rows in pages:
        pdf.add_page()
        for row in rows:
            if isinstance(row, str):
                pdf.cell(0, 6, row, new_x="LMARGIN", new_y="NEXT")
                continue
            for width, text in row:
                pdf.cell(width, 6, text)
            pdf.ln(6)
    return bytes(pdf.output())
