"""The consistency checks and the grounding every result passes before the parser accepts it."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from saga.steps.analytes import loinc_for, unit_key
from saga.steps.checks import (
    EDGE_WARNING,
    first_failure,
    flag_agrees,
    not_a_reference_bound,
    unit_plausible,
    value_matches_text,
    value_possible,
    warnings_for,
)
from saga.steps.models import Biomarker, Extraction, Flag, Provenance
from saga.steps.numbers import NumberFormat
from saga.steps.vetting import annotate, ground, vet

H, L, N, U = Flag.HIGH, Flag.LOW, Flag.NORMAL, Flag.UNKNOWN


def at(line: str, written: str, **fields: object) -> Biomarker:
    """A Biomarker whose provenance points at the first ``written`` in ``line``."""
    start = line.index(written)
    where = Provenance(page=1, line=line, start=start, end=start + len(written))
    return Biomarker(**{"name": "x", "value_text": written, "provenance": where, **fields})  # type: ignore[arg-type]


COMMA, POINT, UNTOLD = NumberFormat(","), NumberFormat("."), NumberFormat()


@pytest.mark.parametrize(
    ("value", "text", "fmt", "ok"),
    [
        (13.2, "13,2", COMMA, True),
        (7.5, "7,500", COMMA, True),  # a decimal-comma document's 7,500
        (7500, "7,500", POINT, True),  # a thousands separator
        (7500, "7,500", COMMA, False),
        (7.5, "7,500", UNTOLD, False),  # the document does not say: refused, not guessed
        (7500, "7,500", UNTOLD, False),
        (0.3, "<0.3", UNTOLD, True),
        (1250, "1.250", COMMA, True),  # a point as thousands separator
        (1.25, "1.250", COMMA, False),
        (245000, "245.000", COMMA, True),
        (245.0, "245.000", COMMA, False),  # issue 28: Plaquetas 245.000 /mm3 read as 245
        (245.0, "245.000", UNTOLD, False),
        (4.5, "4,5", POINT, False),  # a decimal comma where decimals are points
        (15.5, "11.2", POINT, False),
        (3.0, "0.3", POINT, False),
    ],
)
def test_value_matches_its_text(value: float, text: str, fmt: NumberFormat, ok: bool) -> None:
    """A value the written text does not state under the document's format is rejected, and
    a numeral the format leaves ambiguous is refused with the reason."""
    found = Biomarker(name="x", value=value, value_text=text)
    assert (value_matches_text(found, fmt) is None) is ok


@pytest.mark.parametrize(
    ("line", "written", "reference", "bound"),
    [
        ("Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L", "15.5", "", True),
        ("Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L", "12.0", "", True),
        ("Glucose  70  mg/dL  (ref 70-99)", "70", "70-99", False),
        ("TSH 2.1 mIU/L 0.4-4.0", "4.0", "0.4-4.0", True),
        ("Sodium  135  mmol/L  135-145", "135", "135-145", False),
        ("Base excess  -1.5 mmol/L  -2.0 - 2.0", "-1.5", "-2.0 - 2.0", False),
    ],
)
def test_value_is_not_a_reference_bound(
    line: str, written: str, reference: str, bound: bool
) -> None:
    """A value read from inside the range (either end) is rejected; one equal to a bound is not."""
    found = at(line, written, value=float(written), reference_text=reference)
    assert (not_a_reference_bound(found) is not None) is bound


@pytest.mark.parametrize(
    ("value", "low", "high", "text", "flag", "ok", "warned"),
    [
        (15.5, 12.0, 15.5, "12.0 - 15.5", L, True, True),  # at the edge: kept, with a warning
        (11.2, 12.0, 15.5, "12.0 - 15.5", L, True, False),
        (16.0, 12.0, 15.5, "12.0 - 15.5", L, False, False),  # low flag on a high value
        (13.0, 12.0, 15.5, "12.0 - 15.5", H, False, False),
        (13.0, 12.0, 15.5, "12.0 - 15.5", N, True, False),
        (150, None, 150, "< 150", H, True, False),  # strict bound: 150 is high
        (4.0, None, None, "", H, True, False),  # no range: nothing to compare
    ],
)
def test_flag_agrees_with_value_and_range(
    value: float,
    low: float | None,
    high: float | None,
    text: str,
    flag: Flag,
    ok: bool,
    warned: bool,
) -> None:
    """A flag that contradicts value and range is rejected, except at the range's edge."""
    found = Biomarker(
        name="x",
        value=value,
        reference_low=low,
        reference_high=high,
        reference_text=text,
        flag=flag,
    )
    assert (flag_agrees(found) is None) is ok
    assert (EDGE_WARNING in warnings_for(found)) is warned


@pytest.mark.parametrize(
    ("canonical", "unit", "value", "unit_ok", "value_ok"),
    [
        ("Hemoglobin", "g/dL", 13.2, True, True),
        ("Hemoglobin", "g/L", 131, True, True),
        ("Hemoglobin", "%", 13.2, False, True),
        ("Hemoglobin", "g/dL", 132, True, False),
        ("White blood cell count", "/nl", 7500, True, False),  # 7,500 misread as 7500
        ("White blood cell count", "x10E3/uL", 7.9, True, True),
        ("Platelet count", "thou/mm3", 168, True, True),
        ("Sodium", "mEq/L", 139, True, True),
        ("Sodium", "mmol/L", 1390, True, False),
        ("Omega-3 Index", "%", 5.2, True, True),  # unknown to the table: not checked
    ],
)
def test_unit_and_value_plausible_for_the_analyte(
    canonical: str, unit: str, value: float, unit_ok: bool, value_ok: bool
) -> None:
    """Units the analyte is reported in, and values a living patient can have in them."""
    found = Biomarker(name=canonical, canonical_name=canonical, value=value, unit=unit)
    assert (unit_plausible(found) is None) is unit_ok
    if unit_ok:
        assert (value_possible(found) is None) is value_ok


def test_loinc_only_where_the_unit_fits_the_code() -> None:
    """718-7 is hemoglobin by mass; in mmol/L (substance) no code rather than a wrong one."""
    assert loinc_for("Hemoglobin", "g/dL") == "718-7"
    assert loinc_for("Hemoglobin", "mmol/L") == ""
    assert loinc_for("Glucose", "mmol/L") == "" and loinc_for("Glucose", "mg/dL") == "2345-7"
    assert unit_key("x10E3/\u00b5L") == unit_key("K/uL") == unit_key("/nl") == "10^9/l"


def test_annotate_takes_canonical_names_and_distrusts_an_extractors_loinc() -> None:
    """German names get their canonical name; a LOINC the table does not give is dropped."""
    found = annotate(Biomarker(name="H\u00e4moglobin", unit="g/dl", loinc="999-9"))
    assert (found.canonical_name, found.loinc) == ("Hemoglobin", "718-7")
    assert annotate(Biomarker(name="Mystery factor", loinc="999-9")).loinc == ""


PAGE = ["Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L", "CRP  < 0.5  mg/L  <5"]


def test_grounding_finds_a_value_without_provenance() -> None:
    """A result an extractor gave without provenance is located by name (or synonym) and value."""
    found = ground(Biomarker(name="Hgb", value=11.2, value_text="11.2"), [PAGE])
    assert not isinstance(found, str) and found.provenance is not None
    assert found.provenance.line[found.provenance.start : found.provenance.end] == "11.2"


def test_grounding_rejects_what_the_page_does_not_say() -> None:
    """A value absent from the cited line, a missing page or line, are reasons, not results."""
    cite = Provenance(page=1, line=PAGE[0], start=0, end=4)
    assert ground(Biomarker(name="Hemoglobin", value=9.9, value_text="9.9"), [PAGE]) == (
        "its name and value do not occur together"
    )
    assert "page 3" in str(ground(Biomarker(name="x", provenance=replace(cite, page=3)), [PAGE]))
    moved = replace(cite, line="Hemoglobin 14.0 g/dL")
    assert "not on page 1" in str(ground(Biomarker(name="x", provenance=moved), [PAGE]))


def test_grounding_corrects_a_span_to_the_value_as_written() -> None:
    """``<0.5`` cited in a line that writes ``< 0.5`` takes that text and its span."""
    cite = Provenance(page=1, line=PAGE[1], start=0, end=3)
    found = ground(Biomarker(name="CRP", value=0.5, value_text="<0.5", provenance=cite), [PAGE])
    assert not isinstance(found, str) and found.value_text == "< 0.5"


def test_vet_moves_failures_to_rejected_with_their_reason() -> None:
    """An LLM-style answer reading the range's bound as the value is rejected, never accepted."""
    answer = Extraction(
        biomarkers=[
            Biomarker(name="Hemoglobin", value=15.5, value_text="15.5", unit="g/dL", flag=L),
            Biomarker(name="CRP", value=0.5, value_text="<0.5", comparator="<", unit="mg/L"),
        ]
    )
    vetted = vet(answer, ["\n".join(PAGE)])
    assert [b.name for b in vetted.biomarkers] == ["CRP"]
    [rejected] = vetted.rejected
    assert rejected.name == "Hemoglobin" and "reference range" in rejected.reason
    assert rejected.provenance is not None and rejected.provenance.line == PAGE[0]


def test_first_failure_is_none_for_a_sound_result() -> None:
    """A result that passes every check has no failure and no warning."""
    found = at("Glucose  92  mg/dL  70-99", "92", value=92, unit="mg/dL", canonical_name="Glucose")
    found = replace(found, reference_low=70, reference_high=99, reference_text="70-99", flag=N)
    assert first_failure(found) is None and warnings_for(found) == []
