"""Cells of a table line, with their places, and table headers.

A line splits into cells on pipes, tabs (made two spaces by the router) or runs
of two or more spaces. Each cell keeps its offset in the line, so that a value
read from a cell can be pointed at in the line as the page holds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_GAP = re.compile(r"\s*\|\s*|\s{2,}")
# the first role whose word appears in a header cell claims it: order matters
# ("Reference Value" is the range, "Gene Name" the gene)
_HEADER_WORDS: dict[str, tuple[str, ...]] = {
    "gene": ("gene",),
    "variant": ("variant", "mutation", "genotype", "allele"),
    "interpretation": ("interpretation", "significance", "zygosity", "classification"),
    # an earlier result's column: claimed first, so that it is never the result
    "previous": ("previous", "prior", "anterior", "vorwert", "precedent", "précédent",
                 "vorige", "tidigare", "forrige", "precedente"),
    "range": (
        "reference", "range", "ref", "interval", "normal", "referenzbereich", "norm",
        "referencia", "referência", "referentie", "riferimento", "referens", "referanse",
        "referanseområde", "normalwerte", "valores", "intervalo", "référence", "normes",
    ),
    "name": (
        "test", "tests", "analyte", "component", "name", "biomarker", "parameter",
        "investigation", "untersuchung", "analyt", "prueba", "determinación", "exame",
        "examen", "analyse", "análise", "analisi", "esame", "bepaling", "analys", "estudio",
    ),
    "result": (
        "result", "value", "results", "ergebnis", "wert", "resultado", "risultato",
        "resultat", "résultat", "uitslag", "valor", "befund",
    ),
    "unit": ("unit", "units", "einheit", "unidad", "unidades", "unidade", "unità", "unité",
             "unités", "enhet", "eenheid"),
    "flag": ("flag", "abnormal", "h/l", "status", "indicator"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Cell:
    """A cell's text (trimmed) and where it starts in its line."""

    text: str
    start: int


@dataclass(frozen=True, slots=True)
class Header:
    """Column positions of a table header; ``kind`` is ``labs`` or ``genetics``."""

    kind: str
    columns: dict[str, int]
    width: int
    piped: bool = False
    """Cells separated by pipes: the table ends at the first line without one."""
    repeated: bool = False
    """Two tables side by side under one header line (``Test Result ... Test Result``)."""


def cells_of(line: str) -> list[Cell]:
    """Non-empty cells of a pipe row or of a row aligned with runs of spaces."""
    cells: list[Cell] = []
    position = 0
    for gap in [*_GAP.finditer(line), None]:
        end = gap.start() if gap else len(line)
        _add_cell(cells, line, position, end)
        position = gap.end() if gap else end
    return cells


def _add_cell(cells: list[Cell], line: str, start: int, end: int) -> None:
    text = line[start:end]
    stripped = text.strip()
    if stripped:
        cells.append(Cell(stripped, start + len(text) - len(text.lstrip())))


def split_cells(line: str) -> list[str]:
    """The texts of ``cells_of(line)``."""
    return [cell.text for cell in cells_of(line)]


def row_cells(header: Header, line: str) -> list[Cell]:
    """Cells of a table row under ``header``; pipe rows keep their empty cells.

    A leading or trailing pipe is a border only when the row has more cells than
    the header: ``| Folate | 12.0`` under five columns starts with an empty cell.
    """
    if "|" not in line:
        return cells_of(line)
    cells, position = [], 0
    for part in line.split("|"):
        stripped = part.strip()
        cells.append(Cell(stripped, position + len(part) - len(part.lstrip())))
        position += len(part) + 1
    if len(cells) > header.width and not cells[0].text:
        cells.pop(0)
    if len(cells) > header.width and not cells[-1].text:
        cells.pop()
    return cells + [Cell("", len(line))] * (header.width - len(cells))


def _any_word(role: str, *more: str) -> re.Pattern[str]:
    keys = [key for name in (role, *more) for key in _HEADER_WORDS[name]]
    return re.compile(r"(?<![a-z])(?:" + "|".join(map(re.escape, keys)) + r")(?![a-z])")


_NAME_OR_GENE = _any_word("name", "gene")
_RESULT_OR_VARIANT = _any_word("result", "variant")


def parse_header(line: str) -> Header | None:
    """A table header naming at least the test and result (or gene and variant) columns."""
    lowered = line.lower()
    if not _NAME_OR_GENE.search(lowered) or not _RESULT_OR_VARIANT.search(lowered):
        return None  # most lines: no header words at all, decided in one pass
    cells = split_cells(line)
    if len(cells) < 2:
        return None
    columns: dict[str, int] = {}
    for index, cell in enumerate(cells):
        words = _words(cell)
        for role, keys in _HEADER_WORDS.items():
            if role not in columns and any(key in words or key == cell.lower() for key in keys):
                columns[role] = index
                break
    piped = "|" in line
    if "name" in columns and "result" in columns:
        names = sum(any(key in _words(cell) for key in _HEADER_WORDS["name"]) for cell in cells)
        return Header("labs", columns, len(cells), piped, repeated=names > 1)
    if "gene" in columns and "variant" in columns:
        return Header("genetics", columns, len(cells), piped)
    return None


def _words(cell: str) -> list[str]:
    return re.split(r"[\s_.:()]+", cell.lower())


def cell(header: Header, cells: list[Cell], role: str) -> Cell:
    """The cell of ``role`` in a row (an empty cell when the row lacks it)."""
    index = header.columns.get(role)
    return cells[index] if index is not None and index < len(cells) else Cell("", 0)


def table_cells(header: Header, line: str) -> dict[str, str]:
    """A non-lab table row as role -> cell text (empty for missing columns)."""
    cells = row_cells(header, line)
    return {role: cell(header, cells, role).text for role in header.columns}
