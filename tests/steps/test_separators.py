"""h29: layouts nobody here had made (pipes without a known header, a semicolon export,
a range labelled ``N:``, a unit column before the value, a unit header word we do not
know), read through general rules; and the check that refuses a value whose unit column
was not placed."""

from __future__ import annotations

import pytest

from saga.steps.checks import first_failure
from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.extract_rules import extract_rules
from saga.steps.models import Biomarker, Flag, ParserOutput, Provenance, RouterOutput
from saga.steps.page_layout import column_separators
from saga.steps.parser import parse
from saga.steps.testing import make_context

EXPORT = """Export Laborbefunde - Praxis Dr. Weber
Parameter;Ergebnis;Einheit;Referenz;Flag
Leukozyten;11,8;Tsd/µl;4,0-10,0;H
Kalium;3,3;mmol/l;3,5-5,1;L
GPT (ALT);41;U/l;< 50;"""


def _seen(page: str) -> dict[str, tuple[float | None, str, str, Flag]]:
    found = extract_rules([page]).biomarkers
    return {b.name: (b.value, b.unit, b.reference_text, b.flag) for b in found}


def test_a_semicolon_export_is_read_as_a_pipe_table_with_spans_in_the_raw_line() -> None:
    assert _seen(EXPORT) == {
        "Leukozyten": (11.8, "Tsd/µl", "4,0-10,0", Flag.HIGH),
        "Kalium": (3.3, "mmol/l", "3,5-5,1", Flag.LOW),
        "GPT (ALT)": (41, "U/l", "< 50", Flag.NORMAL),
    }
    kalium = next(b for b in extract_rules([EXPORT]).biomarkers if b.name == "Kalium")
    where = kalium.provenance
    assert where is not None and where.line[where.start : where.end] == "3,3"


def test_a_separator_is_a_column_boundary_only_where_lines_agree_on_their_cells() -> None:
    """Two lines with the same 3+ cells make ``;`` a separator; one prose line does not, nor
    lines that already have pipes."""
    assert column_separators(["a;1;x", "b;2;y"]) == ";"
    assert column_separators(["Na 134; K 3.4; Cr 2.1", "Plan: repeat in 4 weeks."]) == ""
    # prose writes "; " glued to the word before: two such lines are still prose
    assert column_separators(["Na 134; K 3.4; Cr 2.1", "Na 131; K 3.9; Cr 2.4"]) == ""
    assert column_separators(["Hierro ; 41 ; µg/dL", "Glucosa ; 98 ; mg/dL"]) == ";"
    assert column_separators(["a | 1;2;3", "b | 4;5;6"]) == ""
    assert column_separators(["a \u2502 1 \u2502 x", "b \u2502 2 \u2502 y"]) == "\u2502"


def test_a_pipe_table_with_ranges_labelled_by_a_word_and_a_colon() -> None:
    page = "Pretraga | Rezultat | Jedinica | Referentni interval\n" + (
        "Kreatinin | 88 | µmol/l | N: 62\u2013106\nKalij | 4,3 | mmol/l | N: 3,5\u20135,1"
    )
    assert _seen(page) == {
        "Kreatinin": (88, "µmol/l", "62\u2013106", Flag.NORMAL),
        "Kalij": (4.3, "mmol/l", "3,5\u20135,1", Flag.NORMAL),
    }


def test_a_unit_column_before_the_value_and_a_flag_column_without_a_header_word() -> None:
    page = (
        "Analyse            Unité       Résultat          Valeurs de référence\n"
        "Glycémie           mmol/l      5.4               3.9 - 5.5\n"
        "Sodium             mmol/l      133          L    136 - 145"
    )
    assert _seen(page) == {
        "Glycémie": (5.4, "mmol/l", "3.9 - 5.5", Flag.NORMAL),
        "Sodium": (133, "mmol/l", "136 - 145", Flag.LOW),
    }


def test_a_header_unit_word_we_do_not_know_leaves_the_unit_to_its_one_unit_cell() -> None:
    page = (
        "Prueba          Result.        Unid.       Referencia\n"
        "Hemoglobina     13,8           g/dL        12,0-16,0\n"
        "Hematocrito     41,2           %           36,0-46,0"
    )
    assert _seen(page) == {
        "Hemoglobina": (13.8, "g/dL", "12,0-16,0", Flag.NORMAL),
        "Hematocrito": (41.2, "%", "36,0-46,0", Flag.NORMAL),
    }


def test_a_value_given_no_unit_whose_line_prints_one_after_it_is_refused() -> None:
    """Whichever extractor dropped the unit column: the line says ``g/dL`` right after the
    value (past a flag), so a unit-less 13.8 is a misread row, not a result."""
    line = "Hemoglobina     13,8    L    g/dL        12,0-16,0"
    found = Biomarker(
        name="Hemoglobina",
        value=13.8,
        value_text="13,8",
        provenance=Provenance(page=1, line=line, start=16, end=20),
    )
    assert first_failure(found) == "no unit is given, but its line prints 'g/dL' after the value"
    prose = "Na 134, K 3.4 today"
    unitless = Biomarker(
        name="Na",
        value=134,
        value_text="134",
        provenance=Provenance(page=1, line=prose, start=3, end=6),
    )
    assert first_failure(unitless) is None


@pytest.mark.anyio
async def test_the_parser_reads_the_export_without_review() -> None:
    routed = RouterOutput(document_name="x.pdf", media_type="application/pdf", page_count=1)
    config = StepConfig(extractor=ExtractorKind.RULES)
    out: ParserOutput = await parse(
        make_context(step="parser", pages=[EXPORT], config=config), routed
    )
    assert [b.name for b in out.extraction.biomarkers] == ["Leukozyten", "Kalium", "GPT (ALT)"]
    assert out.review == ""


def test_prose_lists_with_semicolons_stay_prose() -> None:
    """Two lines of ``Na 134; K 3.4; Cr 2.1 mg/dL`` agree on their cells, but are sentences:
    read by the prose rules as before (every value, with its line), not split as a table."""
    page = "Labs today: Na 134; K 3.4; Cr 2.1 mg/dL.\nYesterday: Na 131; K 3.9; Cr 2.4 mg/dL."
    found = [(b.name, b.value) for b in extract_rules([page]).biomarkers]
    assert found == [("Na", 134), ("K", 3.4), ("Cr", 2.1), ("Na", 131), ("K", 3.9), ("Cr", 2.4)]
