"""Matching extracted biomarkers with expected rows: exact, wrong, missed, spurious."""

from __future__ import annotations

from saga.evaluation.matching import Outcome, fold, fold_unit, match
from saga.evaluation.truth import ExpectedResult
from saga.steps.models import Biomarker, Provenance


def row(
    name: str,
    value: float | None,
    unit: str = "",
    *,
    text: str = "",
    analyte: str = "",
    comparator: str = "",
    page: int = 1,
) -> ExpectedResult:
    shown = text or ("" if value is None else f"{value:g}")
    return ExpectedResult(
        name=name,
        analyte=analyte or name,
        value_text=shown,
        value=value,
        comparator=comparator,
        unit=unit,
        page=page,
    )


def found(name: str, value: float | None, unit: str = "", **kw: object) -> Biomarker:
    text = kw.pop("value_text", "" if value is None else f"{value:g}")
    return Biomarker(name=name, value=value, value_text=str(text), unit=unit, **kw)  # type: ignore[arg-type]


def outcomes(expected: list[ExpectedResult], got: list[Biomarker]) -> list[str]:
    return sorted(str(pair.outcome) for pair in match(expected, got))


def test_wrong_value_is_wrong_not_missed_and_spurious() -> None:
    """The right analyte with another value is one wrong pair, not a miss plus a spurious."""
    assert outcomes([row("Hemoglobin", 11.2, "g/dL")], [found("Hemoglobin", 15.5, "g/dL")]) == [
        "wrong"
    ]


def test_wrong_unit_is_wrong() -> None:
    """The value alone is not enough: mg/dL against mmol/L is a wrong result."""
    assert outcomes([row("Glucose", 5.4, "mmol/L")], [found("Glucose", 5.4, "mg/dL")]) == ["wrong"]


def test_value_read_into_the_name_is_wrong_not_spurious() -> None:
    """``Hemoglobin 11.2 g/dL 12.0 -`` with 15.5 is the Hemoglobin row misread: wrong."""
    got = found("Hemoglobin 11.2 g/dL 12.0 -", 15.5, "g/dL")
    pairs = match([row("Hemoglobin", 11.2, "g/dL")], [got])
    assert [p.outcome for p in pairs] == [Outcome.WRONG]


def test_a_longer_analyte_name_is_not_taken_for_a_misread_row() -> None:
    """``Hemoglobin A1c`` is not a Hemoglobin row with its value in the name."""
    assert outcomes([row("Hemoglobin", 13.0, "g/dL")], [found("Hemoglobin A1c", 6.1, "%")]) == [
        "missed",
        "spurious",
    ]


def test_units_fold_case_spaces_and_micro() -> None:
    """µg/L, μg/l, ug/L and mcg/L are one unit; so are 'mL/min/1.73 m2' and 'ml/min/1.73m2'."""
    assert len({fold_unit(u) for u in ("µg/L", "\u03bcg/l", "ug/L", "mcg/L")}) == 1
    assert fold_unit("mL/min/1.73 m2") == fold_unit("ml/min/1.73m2")
    assert fold_unit("mmol/L") != fold_unit("umol/L")
    assert fold_unit("x10*3/uL") == fold_unit("x10^3/uL")  # UCUM writes the power with *
    assert fold_unit("x10*3/uL") != fold_unit("x10^6/uL")


def test_names_fold_case_diacritics_and_whitespace() -> None:
    """'Hämoglobin', 'HAMOGLOBIN ' and 'hamoglobin' meet."""
    assert fold("Hämoglobin") == fold("  HAMOGLOBIN ") == "hamoglobin"


def test_canonical_name_matches_the_analyte() -> None:
    """A German name is exact when the extractor's canonical name is the truth's analyte."""
    expected = row("Leukozyten", 7.5, "/nl", text="7,500", analyte="White blood cell count")
    got = found("Leukocytes", 7.5, "/nl", canonical_name="White blood cell count")
    assert outcomes([expected], [got]) == ["exact"]


def test_thousands_misread_as_decimals_is_wrong() -> None:
    """7,500 read as 7500 in a comma-decimal document is a wrong value."""
    expected = row("Leukozyten", 7.5, "/nl", text="7,500")
    assert outcomes([expected], [found("Leukozyten", 7500, "/nl", value_text="7,500")]) == ["wrong"]


def test_word_results_compare_without_case_spaces_or_hyphens() -> None:
    """NON-REACTIVE matches 'Non reactive'; a number for a word result is wrong."""
    expected = row("HBsAg", None, text="NON-REACTIVE")
    assert outcomes([expected], [found("HBsAg", None, value_text="Non reactive")]) == ["exact"]
    assert outcomes([expected], [found("HBsAg", 0.0, value_text="0")]) == ["wrong"]


def test_censored_value_needs_its_comparator() -> None:
    """<0.3 is exact as 0.3 with '<', or as the text '<0.3'; as a bare 0.3 it is wrong."""
    expected = row("CRP", 0.3, "mg/dL", text="<0.3", comparator="<")
    with_comparator = found("CRP", 0.3, "mg/dL", comparator="<", value_text="<0.3")
    text_only = found("CRP", None, "mg/dL", value_text="<0.3")
    bare = found("CRP", 0.3, "mg/dL", value_text="0.3")
    assert outcomes([expected], [with_comparator]) == ["exact"]
    assert outcomes([expected], [text_only]) == ["exact"]
    assert outcomes([expected], [bare]) == ["wrong"]


def test_duplicate_extraction_is_one_exact_and_one_spurious() -> None:
    """Reading the same row twice: the second copy is spurious."""
    expected = [row("Sodium", 139, "mmol/L")]
    got = [found("Sodium", 139, "mmol/L"), found("Sodium", 139, "mmol/L")]
    assert outcomes(expected, got) == ["exact", "spurious"]


def test_same_analyte_on_two_pages_pairs_by_page() -> None:
    """Glucose on pages 1 and 2: each extraction pairs with the row on its own page."""
    expected = [row("Glucose", 90, "mg/dL", page=1), row("Glucose", 140, "mg/dL", page=2)]
    got = [
        found("Glucose", 140, "mg/dL", provenance=Provenance(page=2, line="Glucose 140")),
        found("Glucose", 91, "mg/dL", provenance=Provenance(page=1, line="Glucose 91")),
    ]
    pairs = match(expected, got)
    exact = [p for p in pairs if p.outcome is Outcome.EXACT]
    wrong = [p for p in pairs if p.outcome is Outcome.WRONG]
    assert [p.expected.page for p in exact if p.expected] == [2]
    assert [p.expected.page for p in wrong if p.expected] == [1]


def test_every_row_and_result_is_in_exactly_one_pair() -> None:
    """Nothing is counted twice or lost: pairs cover both lists once."""
    expected = [row("A", 1), row("B", 2), row("C", 3)]
    got = [found("A", 1), found("B", 5), found("D", 4)]
    pairs = match(expected, got)
    assert sorted(p.outcome for p in pairs) == sorted(
        [Outcome.EXACT, Outcome.WRONG, Outcome.MISSED, Outcome.SPURIOUS]
    )
    assert sum(1 for p in pairs if p.expected) == 3
    assert sum(1 for p in pairs if p.found) == 3
