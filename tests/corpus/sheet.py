"""A PDF being drawn together with its ground truth.

A layout draws each result from an ``R`` (the result as a person reads it) and
records that same ``R`` on the page it drew it on, so the printed text and the
truth come from one piece of data typed by hand: the number in ``R.value`` is
written out, never parsed from the printed text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fpdf import FPDF

from saga.evaluation.truth import ExpectedDocument, ExpectedResult
from tests.corpus.fonts import font_path

FIXED_DATE = dt.datetime(2024, 3, 5, 9, 30, tzinfo=dt.UTC)
HIGH, LOW, NORMAL, NONE = "high", "low", "normal", ""


@dataclass(frozen=True)
class R:
    """One result: name as printed, value as printed and as a number, unit, range, flag.

    ``analyte`` is the canonical English name ("" means the printed name is it);
    ``flag_text`` the flag as printed, ``flag`` its meaning (high/low/normal/"").
    """

    name: str
    analyte: str
    text: str
    value: float | None
    unit: str = ""
    ref: str = ""
    flag_text: str = ""
    flag: str = NONE
    comparator: str = ""

    def expected(self, page: int) -> ExpectedResult:
        return ExpectedResult(
            name=self.name,
            analyte=self.analyte or self.name,
            value_text=self.text,
            value=self.value,
            comparator=self.comparator,
            unit=self.unit,
            reference=self.ref,
            flag_text=self.flag_text,
            flag=self.flag,
            page=page,
        )


Decoration = Callable[["Sheet", int, int], None]
"""Draws a page's header or footer: (sheet, page number, page count)."""


class Sheet:
    """An A4 PDF with fixed metadata, a current font, and the truth recorded as it is drawn."""

    def __init__(
        self,
        layout: str,
        description: str,
        *,
        font: str = "helvetica",
        size: float = 10,
        header: Decoration | None = None,
        footer: Decoration | None = None,
    ) -> None:
        self.layout = layout
        self.description = description
        self.pdf = FPDF(format="A4", unit="mm")
        self.pdf.set_creation_date(FIXED_DATE)
        self.pdf.set_auto_page_break(auto=False)
        self.pdf.set_margins(15, 15, 15)
        self.pdf.add_font("dejavu", "", str(font_path("sans")))
        self.pdf.add_font("dejavu", "B", str(font_path("sans-bold")))
        self.pdf.add_font("dejavumono", "", str(font_path("mono")))
        self.font = font
        self.size = size
        self.header = header
        self.footer = footer
        self.results: list[ExpectedResult] = []
        self.image_pages: list[int] = []

    @property
    def page(self) -> int:
        return int(self.pdf.page)

    def new_page(self) -> None:
        self.pdf.add_page()
        self.pdf.set_font(self.font, size=self.size)
        if self.header:
            self.header(self, self.page, 0)
            self.pdf.set_font(self.font, size=self.size)

    def style(self, font: str | None = None, style: str = "", size: float | None = None) -> None:
        self.pdf.set_font(font or self.font, style, size or self.size)

    def line(
        self, text: str = "", h: float = 5.5, *, bold: bool = False, size: float | None = None
    ) -> None:
        """One line of text at the left margin."""
        self.style(style="B" if bold else "", size=size)
        self.pdf.cell(0, h, text, new_x="LMARGIN", new_y="NEXT")
        self.style()

    def cells(
        self, cells: Sequence[tuple[float, str]], h: float = 5.5, *, bold: bool = False
    ) -> None:
        """One table row: (width in mm, text) cells from the left margin."""
        self.style(style="B" if bold else "")
        for width, text in cells:
            self.pdf.cell(width, h, text)
        self.pdf.ln(h)
        self.style()

    def at(self, x: float, y: float, text: str) -> None:
        """Text with its baseline at (x, y) mm: for free placement (columns, cards)."""
        self.pdf.text(x, y, text)

    def gap(self, h: float = 3) -> None:
        self.pdf.ln(h)

    def record(self, *results: R, page: int | None = None) -> None:
        """These results are printed on ``page`` (the current page by default)."""
        self.results += [r.expected(page or self.page) for r in results]

    def finish(
        self, *, expect_review: bool = False, diagnoses: Sequence[str] = ()
    ) -> tuple[bytes, ExpectedDocument]:
        """Footers drawn on every page (now that the count is known); the PDF and its truth."""
        count = self.page
        if self.footer:
            for number in range(1, count + 1):
                self.pdf.page = number
                self.style()
                self.footer(self, number, count)
        truth = ExpectedDocument(
            layout=self.layout,
            document=f"{self.layout}.pdf",
            description=self.description,
            results=self.results,
            page_count=count,
            expect_review=expect_review,
            image_pages=self.image_pages,
            diagnoses=list(diagnoses),
        )
        return bytes(self.pdf.output()), truth
