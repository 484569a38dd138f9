"""The offline rules extractor: lab results, diagnoses, procedures and genetics from page text.

No network, no model: regular expressions over the lines that
``saga.steps.pages`` produces (PDF layout text, columns separated by two or
more spaces; or plain text), page by page so that every value carries its
provenance (page, source line, the value's span in it). The parser then checks
every result (``saga.steps.vetting``) and measures coverage.

Handles
-------
* Page furniture removed first (``saga.steps.page_layout``): ``Page 2 of 3``,
  ``Printed ...`` lines, and lines repeated word for word at the top or bottom of
  several pages (letterheads, disclaimers); dot leaders (``Sodium .......``).
* Numbers decided per document (``saga.steps.numbers``): in a document that
  writes decimals with commas ``7,500 /nl`` is 7.5 and ``245.000`` is 245000; in
  one with points ``1,250`` is 1250; where nothing tells, the checks refuse both.
* Aligned rows ``Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L`` (the unit may come
  again after the range, before or after the value's flag), colon rows
  ``Chloride: 101 mmol/L (ref 98-107)``, single-space rows ``Glucose 105 mg/dL
  70-99 H`` (a unit, range or flag is required), results side by side on one
  line, and header tables (pipes, tabs or space runs; header words in English,
  German; two tables under one header line; a Method column). A previous result
  with its date and a trailing performing-lab code are dropped; a unit printed
  in the name column (``Hemoglobin (g/dL)``) is the result's unit.
* Values: numbers, censored results (``<0.3``: value 0.3, comparator ``<``),
  word results (``NON-REACTIVE``, ``Negative``, ``2+``, ``Trace``).
* Ranges ``a-b``, ``a - b``, ``a to b`` (hyphen or en dash; ``bis``, ``a``, ``à``,
  ``tot``), ``<x``, ``>x``, ``≤x``, ``> OR = x``, ``Less than x``, ``Greater than x``,
  ``Less than or equal to x``, ``up to x``, ``(Normal: a - b)``, ``[a - b]``; flags
  ``H``/``L``/``HH`` (also glued: ``118L``), ``High``/``(High)``, ``CRITICAL``,
  ``▲``/``▼``/``↑``/``↓``, ``+`` and the minus sign, ``*``/``!``/``A``.
  A written high/low/normal flag wins; a directionless one is computed.
* Category lines under a result (``High: >=240``, ``Deficiency: <20 ng/mL``)
  become its ``note`` (``saga.steps.categories``); a trailing lab-code or method
  column is dropped; a cumulative table is read under its latest date, the
  earlier columns kept as ``previous`` (``saga.steps.cumulative``).
* Result cards (names on one line, ``value unit`` under each, then
  ``Reference: a-b`` and ``Above range``), names wrapped over two or three lines
  (``Anti-CCP (high`` / ``sensitivity)``, ``Gamma-Glutamyl`` / ``Transferase``).
* Prose: ``C-reactive protein was 48 mg/L (ref <5)`` when the analyte is in the
  synonym table and the unit fits it (also across a line break), unit-less lists
  ``Na 134, K 3.4, Cr 2.1``, and ``Diagnosis: ...`` inside a sentence;
  thresholds (``48 mmol/mol or above``) are not results.
* Sections by heading (``Diagnoses``/``Assessment``/``Problem list``,
  ``Procedures``/``Surgical history``, ``Genetic``/``Genomic`` results,
  ``Notes``/``Comments``/``Interpretation``/``Medications``/``Plan``, and
  ``Hospital course`` read as prose): one item per line, bullets and numbering
  stripped, ICD-10 codes and dates taken; a result row ends a diagnosis list.

Does not handle
---------------
* Scanned pages without a text layer (the parser flags them for review: OCR or
  the LLM extractor with vision are the way).
* Tables whose columns pypdf's layout text runs together (no two spaces between
  cells), multi-column pages whose columns do not share lines, results whose
  value wraps, a bare ``L`` meaning litres (read as the Low flag), values with a
  space inside the unit other than ``mL/min/1.73 m2``.
* Prose results for analytes the synonym table does not know, or without a
  unit outside a list; results stated only relative to earlier ones.
* Sections do not continue onto the next page; diagnoses or procedures inside
  tables, several items on one line, genes written as names
  (``Factor V Leiden``) rather than symbols.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from msgspec.structs import replace

from saga.steps.cards import card_rows
from saga.steps.categories import is_category_line
from saga.steps.coverage import NOTE_SEPARATOR
from saga.steps.cumulative import DatedHeader, parse_dated_header
from saga.steps.lab_cells import Header, parse_header, table_cells
from saga.steps.lab_rows import Row, dated_row, parse_rows, parse_table_row
from saga.steps.models import Biomarker, Diagnosis, Extraction, GeneticFinding, Procedure
from saga.steps.page_layout import SourceLine, document_lines
from saga.steps.prose import Paragraph
from saga.steps.provenance import located
from saga.steps.sections import Section, diagnosis, genetic, heading, inline_diagnoses, procedure
from saga.steps.synonyms import canonical_name
from saga.steps.wrapped_names import Fragments

_NOISE = re.compile(r"(?i)page \d+(?: of \d+)?|[-=_*.\s|:+]+")
_EMPTY_ITEM = re.compile(
    r"(?i)(?:[-*]\s*)?(?:none|n/?a|nil|not applicable)(?: known| reported)?\.?"
)


@dataclass
class _Found:
    biomarkers: list[Biomarker] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)
    procedures: list[Procedure] = field(default_factory=list)
    genetics: list[GeneticFinding] = field(default_factory=list)
    prose: set[int] = field(default_factory=set)
    """Indices of the biomarkers read from running prose."""


def extract_rules(pages: Sequence[str]) -> Extraction:
    """Everything the rules find in ``pages``, in document order, each value with provenance."""
    found = _Found()
    for lines in document_lines(pages, keep=lambda line: parse_header(line) is not None):
        _Page(found, lines).read()
    return Extraction(
        biomarkers=_without_prose_repeats(found),
        diagnoses=found.diagnoses,
        procedures=found.procedures,
        genetics=found.genetics,
    )


def _analyte(b: Biomarker) -> str:
    return canonical_name(b.name) or " ".join(b.name.lower().split())


def _without_prose_repeats(found: _Found) -> list[Biomarker]:
    """The results minus prose values that a result row contradicts.

    Prose beside a table (a letter's second column) quotes earlier values: "potassium
    was 4.9 mmol/L in January" beside the row "Potassium 5.4 mmol/L". A prose value
    with the unit of a row of the same analyte but another value is dropped: its line
    then counts as unexplained and the low coverage sends the document to review.
    Unit-less prose values ("K 3.4" in a discharge summary's course) stay.
    """
    rows = {
        (_analyte(b), b.unit): b.value
        for i, b in enumerate(found.biomarkers)
        if i not in found.prose and b.unit
    }
    return [
        b
        for i, b in enumerate(found.biomarkers)
        if i not in found.prose
        or (_analyte(b), b.unit) not in rows
        or rows[(_analyte(b), b.unit)] == b.value
    ]


class _Page:
    """Reading state of one page: section, open table, name fragments, prose, skipped lines."""

    def __init__(self, found: _Found, lines: list[SourceLine]) -> None:
        self.found, self.lines = found, lines
        self.section = Section.LABS
        self.table: Header | None = None
        self.dated: DatedHeader | None = None  # a cumulative table's dated columns
        self.fragments = Fragments()
        self.prose = Paragraph()
        self.skip: set[int] = set()
        self.previous: SourceLine | None = None  # the last line that gave nothing
        self.last: int | None = None  # the page's last result, which notes attach to

    def read(self) -> None:
        for index, line in enumerate(self.lines):
            if index not in self.skip and not _NOISE.fullmatch(line.work.strip()):
                self._line(line, index)
        self._flush_prose()

    def _line(self, line: SourceLine, index: int) -> None:
        text = line.work.strip()
        if is_category_line(text):
            self._attach(line)  # "High: >=240" under a result is its category, not a result
            return
        if (header := parse_header(text)) is not None:
            self._flush_prose()
            self.table, self.dated = header, None
            self.fragments.clear()
            return
        if (dated := parse_dated_header(line.work)) is not None:
            self._flush_prose()
            self.table, self.dated = None, dated
            return
        if self.dated is not None and heading(text) is None:
            # in a cumulative table only a placed row is read: any other reading of
            # "Platelets  388  341" could take an earlier column for the current one
            if (row := dated_row(self.dated, line.work)) is not None:
                self._results([row], line, index)
            return
        if (opened := heading(text)) is not None:
            self._flush_prose()
            self.dated = None
            self._open(opened[0], opened[1])
            return
        if self.table is not None:
            if self._table_row(line, index):
                return
            if self.table.piped and "|" not in text:
                self.table = None  # a pipe table ends at the first line without a pipe
        self._item(line, index)

    def _attach(self, line: SourceLine) -> None:
        """The line as part of the note of the page's last result, when there is one."""
        self._flush_prose()
        if self.last is None:
            return  # no result above it on this page: coverage counts it as unexplained
        found = self.found.biomarkers[self.last]
        note = f"{found.note}{NOTE_SEPARATOR}{line.raw}" if found.note else line.raw
        self.found.biomarkers[self.last] = replace(found, note=note)

    def _open(self, section: Section, rest: str) -> None:
        self.fragments.clear()
        if section is not Section.LABS or rest:
            self.table = None  # a panel title inside a table does not end it
        if section is Section.DIAGNOSES and rest:
            # "Diagnosis: pneumonia. Plan: ..." names one diagnosis and opens nothing
            self._diagnoses([re.split(r"\.\s|;", rest)[0]])
            return
        self.section = section
        if rest and section is not Section.NOTES:
            self._listed(rest)

    def _table_row(self, line: SourceLine, index: int) -> bool:
        assert self.table is not None
        if self.table.kind == "genetics":
            cells = table_cells(self.table, line.work)
            if cells.get("gene") and cells.get("variant"):
                self.found.genetics.append(
                    GeneticFinding(
                        gene=cells["gene"],
                        variant=cells["variant"],
                        interpretation=cells.get("interpretation", ""),
                    )
                )
                return True
            return False
        if self.table.repeated:
            rows = parse_rows(line.work)  # two tables side by side under one header line
        else:
            row = parse_table_row(self.table, line.work)
            rows = [row] if row is not None else []
        if rows:
            self._results(rows, line, index)
        return bool(rows)

    def _item(self, line: SourceLine, index: int) -> None:
        text = line.work.strip()
        if self.section is not Section.LABS and self.section is not Section.NOTES:
            rows = [
                r for r in parse_rows(line.work) if r.biomarker.unit or r.biomarker.reference_text
            ]
            if not rows:
                self._listed(text)
                return
            self.section = Section.LABS  # a result row ends a list of diagnoses or procedures
        if self.section is Section.NOTES:
            return
        self._diagnoses(inline_diagnoses(text))
        rows = parse_rows(line.work) or self._cards(line, index)
        if rows:
            self._results(rows, line, index)
            return
        self.fragments.offer(text)
        self.previous = line
        for row, source in self.prose.add(line):
            self._add(row, row.biomarker.name, source, prose=True)

    def _cards(self, line: SourceLine, index: int) -> list[Row]:
        if self.previous is None or self.previous is not self._line_before(index):
            return []
        details = [later.work for later in self.lines[index + 1 : index + 3]]
        rows, used = card_rows(self.previous.work, line.work, details)
        self.skip.update(range(index + 1, index + 1 + used))
        if rows:
            self.prose.lines = [kept for kept in self.prose.lines if kept is not self.previous]
        return rows

    def _line_before(self, index: int) -> SourceLine | None:
        return self.lines[index - 1] if index > 0 else None

    def _listed(self, text: str) -> None:
        if _EMPTY_ITEM.fullmatch(text):
            return
        if self.section is Section.DIAGNOSES:
            self._diagnoses([text])
        elif self.section is Section.PROCEDURES and (done := procedure(text)) is not None:
            self.found.procedures.append(done)
        elif self.section is Section.GENETICS and (gene := genetic(text)) is not None:
            self.found.genetics.append(gene)

    def _diagnoses(self, texts: list[str]) -> None:
        for text in texts:
            if (item := diagnosis(text)) is not None:
                self.found.diagnoses.append(item)

    def _results(self, rows: list[Row], line: SourceLine, index: int) -> None:
        self._flush_prose()
        for number, row in enumerate(rows):
            name = row.biomarker.name
            if number == 0 and len(rows) == 1:
                name, taken = self.fragments.complete(name, self.lines, index)
                self.skip.update(taken)
            self._add(row, name, line)
        self.fragments.clear()
        self.previous = None

    def _add(self, row: Row, name: str, line: SourceLine, *, prose: bool = False) -> None:
        self.last = len(self.found.biomarkers)
        if prose:
            self.found.prose.add(self.last)
        self.found.biomarkers.append(located(row, name, line))

    def _flush_prose(self) -> None:
        for row, source in self.prose.flush():
            self._add(row, row.biomarker.name, source, prose=True)
