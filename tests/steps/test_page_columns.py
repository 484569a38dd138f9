"""Two-column pages whose rows do not share lines are read one column block at a time."""

from __future__ import annotations

from saga.steps.extract_rules import extract_rules
from saga.steps.models import Flag
from saga.steps.page_columns import split_columns
from saga.steps.pages import pdf_pages
from tests.corpus import layouts_columns

TABLE = "\n".join(
    [
        "Test          Result    Units     Range",
        "HEMATOLOGY",
        "Hemoglobin    13.9      g/dL      12.0-16.0",
        "Platelets     301       K/uL      150-400",
        "CHEMISTRY",
        "Sodium        140       mmol/L    136-145",
        "Glucose       101 H     mg/dL     70-99",
    ]
)


def test_a_table_s_own_column_gaps_are_not_a_gutter() -> None:
    assert split_columns(TABLE) == TABLE


def test_prose_beside_a_table_is_read_after_it() -> None:
    pdf, _ = layouts_columns.results_beside_history()
    text = pdf_pages(pdf, max_pages=2)[0]
    lines = text.split("\n")
    row = next(line for line in lines if line.startswith("Hemoglobin"))
    assert row.split("  ") == ["Hemoglobin", "14.1", "g/dL", "13.0-17.0"]
    assert text.index("Glucose  96") < text.index("Summary for the referring physician")


def test_a_prose_value_the_row_contradicts_is_not_a_result() -> None:
    pdf, truth = layouts_columns.results_beside_history()
    found = extract_rules(pdf_pages(pdf, max_pages=2)).biomarkers
    values = {(b.name.lower(), b.value) for b in found}
    assert ("potassium", 5.4) in values
    assert all(value not in (4.9, 1.31, 138.0) for _, value in values)
    assert len(found) == len(truth.results)


def _grid(*columns: list[str], width: int = 30) -> str:
    """Columns side by side on a character grid, as pypdf's layout mode draws them."""
    height = max(len(column) for column in columns)
    padded = [column + [""] * (height - len(column)) for column in columns]
    return "\n".join(
        "".join(cell.ljust(width) for cell in row).rstrip() for row in zip(*padded, strict=True)
    )


LEFT = [
    "Sodium  140  mmol/L",
    "",
    "Potassium  4.0  mmol/L",
    "",
    "Chloride  101  mmol/L",
    "",
    "BUN  17  mg/dL",
    "",
]
MIDDLE = [
    "",
    "Glucose  101  mg/dL",
    "",
    "Urea  5.1  mmol/L",
    "",
    "Calcium  9.6  mg/dL",
    "",
    "Albumin  4.4  g/dL",
]
RIGHT = [
    "Iron  58  ug/dL",
    "",
    "",
    "Ferritin  22  ng/mL",
    "",
    "",
    "Folate  9.8  ng/mL",
    "B12  412  pg/mL",
]


def test_three_columns_that_do_not_share_lines_are_read_one_after_another() -> None:
    text = split_columns(_grid(LEFT, MIDDLE, RIGHT))
    lines = [" ".join(line.split()) for line in text.split("\n") if line.strip()]
    assert lines == [
        "Sodium 140 mmol/L",
        "Potassium 4.0 mmol/L",
        "Chloride 101 mmol/L",
        "BUN 17 mg/dL",
        "Glucose 101 mg/dL",
        "Urea 5.1 mmol/L",
        "Calcium 9.6 mg/dL",
        "Albumin 4.4 g/dL",
        "Iron 58 ug/dL",
        "Ferritin 22 ng/mL",
        "Folate 9.8 ng/mL",
        "B12 412 pg/mL",
    ]


def test_rows_aligned_across_the_gutter_are_read_as_whole_rows() -> None:
    left = ["Sodium  140  mmol/L", "Potassium  4.0  mmol/L", "Chloride  101  mmol/L", "BUN  17"]
    right = ["Iron  58  ug/dL", "Ferritin  22  ng/mL", "Folate  9.8  ng/mL", "B12  412"]
    lines = split_columns(_grid(left, right)).split("\n")
    assert [line for line in lines if line] == [*left, *right]


def test_a_name_level_with_the_other_column_s_value_never_takes_it() -> None:
    pdf, truth = layouts_columns.stacked_columns()
    found = extract_rules(pdf_pages(pdf, max_pages=2)).biomarkers
    expected = {r.name.lower(): r.value for r in truth.results}
    assert len(found) == len(truth.results)
    assert all(expected[b.name.lower()] == b.value for b in found)


def test_a_word_result_column_is_not_a_second_column() -> None:
    table = "\n".join(
        [
            "Test            Result      Range",
            "Color           Yellow      Yellow",
            "Clarity         Cloudy      Clear",
            "Protein         Trace       Negative",
            "Nitrite         Positive    Negative",
            "Specific gravity  1.024     1.005-1.030",
        ]
    )
    assert split_columns(table) == table


def test_a_name_above_a_flagged_row_is_one_result() -> None:
    found = extract_rules(["Ferritin\n22 L ng/mL  (ref 30-400)\nFollow up\n2 weeks  later"])
    [ferritin] = found.biomarkers
    assert (ferritin.value, ferritin.flag, ferritin.reference_text) == (22.0, Flag.LOW, "30-400")
    assert ferritin.provenance is not None and ferritin.provenance.start == 0
