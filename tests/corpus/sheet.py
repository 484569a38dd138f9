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


FIELDS = 9


def rows(spec: str) -> list[R]:
    """Results typed as a table, one per line, fields split on ``|`` (text and flag
    text as printed, meaning: high, low, normal or empty)::

        name | analyte | text | value | unit | range | flag text | meaning | comparator

    ``=`` as analyte: the printed name is the canonical one; ``-`` as value: a word
    result; trailing empty fields may be left out. Values are typed, not parsed
    from the printed text.
    """
    out = []
    for line in spec.strip().splitlines():
        f = [cell.strip() for cell in line.split("|")]
        if len(f) > FIELDS or len(f) < 4:
            raise ValueError(f"a corpus row needs 4 to {FIELDS} fields: {line!r}")
        f += [""] * (FIELDS - len(f))
        name, analyte, text, value, unit, ref, flag_text, flag, comparator = f
        if flag not in {HIGH, LOW, NORMAL, NONE}:
            raise ValueError(f"flag meaning {flag!r} is not high, low, normal or empty: {line!r}")
        number = None if value == "-" else float(value)
        analyte = name if analyte == "=" else analyte
        out.append(R(name, analyte, text, number, unit, ref, flag_text, flag, comparator))
    return out


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
        self.font = font
        self._unicode = False
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
        self.style()
        if self.header:
            self.header(self, self.page, 0)
            self.style()

    def style(self, font: str | None = None, style: str = "", size: float | None = None) -> None:
        family = font or self.font
        if family.startswith("dejavu") and not self._unicode:
            # parsing a TrueType file costs ~0.7 s: only for layouts that print beyond Latin-1
            self.pdf.add_font("dejavu", "", str(font_path("sans")))
            self.pdf.add_font("dejavu", "B", str(font_path("sans-bold")))
            self.pdf.add_font("dejavumono", "", str(font_path("mono")))
            self._unicode = True
        self.pdf.set_font(family, style, size or self.size)

    def line(
        self, text: str = "", h: float = 5.5, *, bold: bool = False, size: float | None = None
    ) -> None:
        """One line of text at the left margin."""
        self.style(style="B" if bold else "", size=size)
        self.pdf.cell(0, h, text, new_x="LMARGIN", new_y="NEXT")
        self.style()

    def paragraph(self, text: str, h: float = 5.5) -> None:
        """Prose wrapped at the right margin, as a word processor would."""
        self.pdf.multi_cell(0, h, text, new_x="LMARGIN", new_y="NEXT")

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
