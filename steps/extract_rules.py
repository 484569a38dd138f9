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

from saga.steps.lab_rows import Header, parse_header, parse_row, parse_table_row, table_cells
from saga.steps.models import Biomarker, Diagnosis, Extraction, GeneticFinding, Procedure
from saga.steps.sections import Section, diagnosis, genetic, heading, procedure

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
    """Everything the rules find in ``pages``, in document order."""
    found = _Found()
    for page in pages:
        _read_page(page, found)
    return Extraction(
        biomarkers=found.biomarkers,
        diagnoses=found.diagnoses,
        procedures=found.procedures,
        genetics=found.genetics,
    )


def _read_page(page: str, found: _Found) -> None:
    section, table = Section.LABS, None
    for raw in page.split("\n"):
        line = raw.strip()
        if not line or _NOISE.fullmatch(line):
            continue
        if (header := parse_header(line)) is not None:
            table = header
            continue
        if (opened := heading(line)) is not None:
            section, table = opened[0], None
            line = opened[1]
            if not line:
                continue
        elif table is not None:
            if _table_row(table, line, found):
                continue
            if "|" not in line:
                table = None  # a pipe table ends at the first line without a pipe
        _item(section, line, found)


def _table_row(table: Header, line: str, found: _Found) -> bool:
    if table.kind == "genetics":
        cells = table_cells(table, line)
        if cells.get("gene") and cells.get("variant"):
            found.genetics.append(
                GeneticFinding(
                    gene=cells["gene"],
                    variant=cells["variant"],
                    interpretation=cells.get("interpretation", ""),
                )
            )
            return True
        return False
    row = parse_table_row(table, line)
    if row is not None:
        found.biomarkers.append(row)
    return row is not None


def _item(section: Section, line: str, found: _Found) -> None:
    if section is Section.LABS:
        if (row := parse_row(line)) is not None:
            found.biomarkers.append(row)
        return
    if section is Section.NOTES or _EMPTY_ITEM.fullmatch(line):
        return
    if section is Section.DIAGNOSES and (item := diagnosis(line)) is not None:
        found.diagnoses.append(item)
    elif section is Section.PROCEDURES and (done := procedure(line)) is not None:
        found.procedures.append(done)
    elif section is Section.GENETICS and (gene := genetic(line)) is not None:
        found.genetics.append(gene)
