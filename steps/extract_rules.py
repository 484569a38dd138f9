"""The offline rules extractor: lab results, diagnoses, procedures and genetics from page text.

No network, no model: regular expressions over the lines that
``saga.steps.pages`` produces (PDF layout text, columns separated by two or
more spaces; or plain text).

Handles
-------
* Aligned table rows: ``Hemoglobin A1c   6.1   %   4.0-5.6   H`` (columns split on
  runs of spaces or tabs; the first column is the name).
* Colon rows: ``Hemoglobin A1c: 6.1 % (ref 4.0-5.6)``, ``CRP: <0.5 mg/L [0.0-5.0]``.
* Tables with a header row, separated by pipes, tabs or runs of spaces
  (``Test | Result | Unit | Reference Range | Flag``, columns in any order, header
  words such as Test/Analyte/Component, Result/Value, Units, Reference/Range,
  Flag); a ``Gene | Variant | Interpretation`` table gives genetic findings.
* Single-space rows ``Glucose 105 mg/dL 70-99 H`` when the result has a unit, a
  range or a flag (a bare "name number" is too often prose).
* Values: plain numbers, thousands separators (``1,250``), censored results
  (``<0.5``: ``value`` is None, ``value_text`` keeps it), word results
  (``Negative``, ``Non-reactive``; in column layouts only).
* Ranges ``4.0-5.6``, ``4.0 - 5.6``, ``1 to 3``, ``< 5.7``, ``<=200``, ``> 40``; flags
  H/L/HH/LL/High/Low/N/Normal and the directionless ``*``/``!``/``A``/Abnormal.
  A high/low/normal flag written in the document wins; otherwise (or for a
  directionless marker) it is computed from the value and the range.
* Sections by heading (``Diagnoses``/``Assessment``/``Problem list``,
  ``Procedures``/``Surgical history``, ``Genetic``/``Genomic`` results,
  ``Notes``/``Comments``/``Interpretation``): one item per line, bullets and
  numbering stripped. Diagnoses take an ICD-10 code before or after the name
  (``E11.9 Type 2 diabetes``, ``Hypertension (I10)``); procedures a date in ISO,
  ``12/04/2023``, ``Jan 5, 2024`` or ``March 2015`` form before or after the name;
  genetics ``GENE variant - interpretation`` (also ``:`` or a column gap).

Does not handle
---------------
* Scanned pages without a text layer (the router refuses them: OCR first).
* Names or results wrapped over two lines, multi-column page layouts (two
  tables side by side), values with a unit separated by a space inside the
  unit (``mL/min/1.73 m2``), comma decimals (``6,1``), a bare ``L`` meaning
  litres (it is read as the Low flag).
* Sections do not continue onto the next page (a page header would otherwise
  become a diagnosis); repeat the heading.
* Diagnoses or procedures inside tables, several items on one line, genes
  written as names (``Factor V Leiden``) rather than symbols, and free text
  outside a Notes/Comments section that looks like ``name number unit``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from saga.steps.cards import card_rows
from saga.steps.lab_cells import Header, parse_header, table_cells
from saga.steps.lab_rows import Row, parse_rows, parse_table_row
from saga.steps.models import Biomarker, Diagnosis, Extraction, GeneticFinding, Procedure
from saga.steps.page_layout import SourceLine, document_lines
from saga.steps.prose import Paragraph
from saga.steps.provenance import located
from saga.steps.sections import Section, diagnosis, genetic, heading, inline_diagnoses, procedure
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


def extract_rules(pages: Sequence[str]) -> Extraction:
    """Everything the rules find in ``pages``, in document order, each value with provenance."""
    found = _Found()
    for lines in document_lines(pages, keep=lambda line: parse_header(line) is not None):
        _Page(found, lines).read()
    return Extraction(
        biomarkers=found.biomarkers,
        diagnoses=found.diagnoses,
        procedures=found.procedures,
        genetics=found.genetics,
    )


class _Page:
    """Reading state of one page: section, open table, name fragments, prose, skipped lines."""

    def __init__(self, found: _Found, lines: list[SourceLine]) -> None:
        self.found, self.lines = found, lines
        self.section = Section.LABS
        self.table: Header | None = None
        self.fragments = Fragments()
        self.prose = Paragraph()
        self.skip: set[int] = set()
        self.previous: SourceLine | None = None  # the last line that gave nothing

    def read(self) -> None:
        for index, line in enumerate(self.lines):
            if index not in self.skip and not _NOISE.fullmatch(line.work.strip()):
                self._line(line, index)
        self._flush_prose()

    def _line(self, line: SourceLine, index: int) -> None:
        text = line.work.strip()
        if (header := parse_header(text)) is not None:
            self._flush_prose()
            self.table = header
            self.fragments.clear()
            return
        if (opened := heading(text)) is not None:
            self._flush_prose()
            self._open(opened[0], opened[1])
            return
        if self.table is not None:
            if self._table_row(line, index):
                return
            if self.table.piped and "|" not in text:
                self.table = None  # a pipe table ends at the first line without a pipe
        self._item(line, index)

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
            self._add(row, row.biomarker.name, source)

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

    def _add(self, row: Row, name: str, line: SourceLine) -> None:
        self.found.biomarkers.append(located(row, name, line))

    def _flush_prose(self) -> None:
        for row, source in self.prose.flush():
            self._add(row, row.biomarker.name, source)
