"""Issue 28: the safety net that does not depend on the layout or on the name being known.

Each document is a real PDF (fpdf2), split as the router does, and read by the
parser step, with the rules extractor or with the LLM extractor answering through
litellm's ``mock_response``. What an extractor gets wrong must end as a rejection,
a review flag or a counted line, never as a clean success.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import litellm
import pytest

from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.context import LLM, Completion, Document, Tokenizer
from saga.steps.models import Biomarker, Flag, ParserOutput, RouterOutput
from saga.steps.pages import split_pages
from saga.steps.parser import parse
from saga.steps.testing import make_context
from tests.steps.pdfgen import Row, layout_pdf

pytestmark = pytest.mark.anyio
W = (44, 22, 26, 40, 12)


def row(*cells: str) -> Row:
    return tuple(zip(W, cells, strict=False))


class MockResponseLLM:
    """The LLM port on litellm itself: each call answers ``mock_response`` (no network)."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)

    async def complete(
        self, messages: Sequence[dict[str, str]], *, purpose: str, json_mode: bool = True
    ) -> Completion:
        reply = self.replies.pop(0)
        response: Any = await litellm.acompletion(
            model="gpt-4o-mini", messages=list(messages), mock_response=reply
        )
        return Completion(text=response.choices[0].message.content, model="gpt-4o-mini")

    async def tokenizer(self) -> Tokenizer:
        return Tokenizer(128_000, 16_384, lambda text: len(text) // 4 + 1)


async def read(pages: list[list[Row]], llm: LLM | None = None) -> ParserOutput:
    document = Document("report.pdf", "application/pdf", layout_pdf(pages))
    texts = split_pages(document, max_pages=20)
    routed = RouterOutput(
        document_name="report.pdf", media_type="application/pdf", page_count=len(texts)
    )
    config = StepConfig(extractor=ExtractorKind.LLM if llm else ExtractorKind.RULES)
    return await parse(make_context(step="parser", pages=texts, config=config, llm=llm), routed)


def named(output: ParserOutput, name: str) -> Biomarker:
    return next(b for b in output.extraction.biomarkers if b.name == name)


SPANISH = [
    row("Hemoglobina", "13,4", "g/dL", "12,0 - 16,0"),
    row("Creatinina", "0,92", "mg/dL", "0,50 - 1,10"),
    row("Plaquetas", "245.000", "/mm³", "150.000 - 400.000"),
    row("Leucocitos", "7.500", "/mm³", "4.000 - 10.000"),
]


async def test_thousands_points_in_a_decimal_comma_document() -> None:
    """``245.000`` where decimals are written ``4,12`` is 245000, its range 150000-400000;
    before, it was 245.0 with range 150-400, flag normal, and no review."""
    out = await read([SPANISH])
    platelets, wbc = named(out, "Plaquetas"), named(out, "Leucocitos")
    assert (platelets.value, platelets.reference_low, platelets.reference_high) == (
        245000,
        150000,
        400000,
    )
    assert platelets.flag is Flag.NORMAL and platelets.canonical_name == "Platelet count"
    assert wbc.value == 7500 and named(out, "Hemoglobina").value == 13.4
    assert out.review == "" and not out.extraction.rejected


async def test_a_numeral_the_document_leaves_ambiguous_is_refused() -> None:
    """No number in the document says which mark is the decimal: ``1.250`` is refused with
    the reason and the document flagged, never guessed (before: 1.25, accepted)."""
    out = await read([[row("Ferritin", "1.250", "ng/mL", "30 - 400", "H")]])
    assert not out.extraction.biomarkers
    (refused,) = out.extraction.rejected
    assert "could be a decimal or a thousands separator" in refused.reason
    assert "rejected by the checks" in out.review


async def test_german_thousands_point_with_its_flag() -> None:
    """``Ferritin 1.250 +`` in a German report (``4,5`` decimals) is 1250 and high."""
    out = await read(
        [
            [
                row("Kalium", "4,5", "mmol/l", "3,5 - 5,1"),
                row("Ferritin", "1.250", "ng/ml", "30 - 400", "+"),
            ]
        ]
    )
    ferritin = named(out, "Ferritin")
    assert (ferritin.value, ferritin.flag) == (1250, Flag.HIGH) and out.review == ""


async def test_unknown_names_still_pass_a_magnitude_check() -> None:
    """A name no table knows is still checked by its unit: a count per mm³ is whole, a
    percentage is not 4000; a value nothing vouches for is unverified and reviewed."""
    out = await read(
        [[
            row("Quuxocitos", "7,5", "/mm³", ""),
            row("Zorbase", "4.000,5", "%", ""),
            row("Blarnase", "12,5", "U/L", ""),
            row("Frobnase", "31,0", "U/L", "10,0 - 40,0"),
        ]]
    )  # fmt: skip
    reasons = {r.name: r.reason for r in out.extraction.rejected}
    assert "whole number" in reasons["Quuxocitos"] and "beyond" in reasons["Zorbase"]
    blarnase, frobnase = named(out, "Blarnase"), named(out, "Frobnase")
    assert blarnase.provenance and blarnase.provenance.unverified
    assert frobnase.provenance and frobnase.provenance.vouched_by == ["range"]
    assert "1 value unverified" in out.review


async def test_known_analytes_are_checked_across_count_units() -> None:
    """Platelets 150-400 x10³/µL are 150,000-400,000 /mm³: 245 /mm³ is impossible; the
    Swedish ``X 10³ / µL`` and ``mIE/L`` are units these analytes are reported in."""
    out = await read(
        [[
            row("Platelets", "245", "/mm³", ""),
            row("Thrombocytes", "245000", "/mm³", ""),
            row("B-TPK", "245", "X 10³ / µL", "150-400"),
            row("S-TSH", "2.1", "mIE/L", "0.4-4.0"),
        ]]
    )  # fmt: skip
    assert [r.name for r in out.extraction.rejected] == ["Platelets"]
    assert "impossible for Platelet count" in out.extraction.rejected[0].reason
    assert named(out, "Thrombocytes").provenance.vouched_by == ["analyte"]  # type: ignore[union-attr]
    assert named(out, "B-TPK").canonical_name == "Platelet count"
    assert named(out, "S-TSH").canonical_name == "Thyroid stimulating hormone"


SPANISH_LINES = [
    "Hemoglobina  13,4  g/dL  12,0 - 16,0",
    "Plaquetas  245.000  /mm³  150.000 - 400.000",
    "Glucose  98  mg/dL  70 - 99",
    "High: >=240",
]


def lab(name: str, value: float, text: str, line: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "value": value, "value_text": text, "page": 1, "line": line, **more}


async def test_the_llm_extractors_answers_meet_the_same_checks() -> None:
    """A model that reads the range ``150.000 - 400.000`` as 150-400, returns a category line
    as a result, and skips a line: a rejection for each misread, and the skipped line
    counted (not a success)."""
    answer = {
        "biomarkers": [
            lab("Hemoglobina", 13.4, "13,4", SPANISH_LINES[0], unit="g/dL"),
            lab("Plaquetas", 245000, "245.000", SPANISH_LINES[1], unit="/mm³",
                reference_low=150, reference_high=400, reference_text="150.000 - 400.000"),
            lab("High", 240, ">=240", SPANISH_LINES[3], comparator=">="),
        ]
    }  # fmt: skip
    out = await read([[line for line in SPANISH_LINES]], MockResponseLLM(json.dumps(answer)))
    reasons = {r.name: r.reason for r in out.extraction.rejected}
    assert [b.name for b in out.extraction.biomarkers] == ["Hemoglobina"]
    assert "the bound 150 is not what the range" in reasons["Plaquetas"]
    assert "reference category" in reasons["High"]
    coverage = out.extraction.coverage
    assert (coverage.candidate_lines, coverage.explained_lines) == (3, 2)
    assert "rejected by the checks" in out.review and "coverage" in out.review


async def test_an_llm_value_nothing_vouches_for_is_unverified() -> None:
    """An analyte the table does not know, without a range: accepted, marked unverified, and
    the document flagged with both reasons (nothing vouches; the name is unknown)."""
    line = "Quuxase  412  U/L"
    answer = {"biomarkers": [lab("Quuxase", 412, "412", line, unit="U/L")]}
    out = await read([[line]], MockResponseLLM(json.dumps(answer)))
    (found,) = out.extraction.biomarkers
    assert found.provenance is not None and found.provenance.unverified
    assert out.review == (
        "1 value unverified (no check could vouch for them); 1 value on page 1 with a name"
        " the analyte table does not know, kept unverified"
    )


async def test_a_number_between_name_and_value_is_refused() -> None:
    """``Quuxase  104  97  U/L`` (a current and a previous column, no dates): neither 104 nor
    97 is taken silently, whatever the name; before, 97 (last time's) was accepted."""
    out = await read([["Test  Current  Previous  Units  Range", "Quuxase  104  97  U/L  70-99"]])
    assert not out.extraction.biomarkers and "rejected by the checks" in out.review
    line = "Quuxase  104  97  U/L  70-99"
    answer = {"biomarkers": [lab("Quuxase", 97, "97", line, unit="U/L", reference_low=70,
                                 reference_high=99, reference_text="70-99")]}  # fmt: skip
    llm = await read([[line]], MockResponseLLM(json.dumps(answer)))
    (refused,) = llm.extraction.rejected
    assert "104 stands between the name and the value" in refused.reason


async def test_lakhs_and_gm_dl_of_indian_reports() -> None:
    """``2.5 lakhs/cumm`` platelets are 250,000 /uL and ``gm/dl`` is g/dL: checked, accepted."""
    out = await read(
        [[
            "Haemoglobin  13.2  gm/dl  13.0 - 17.0",
            "Platelet Count  2.5  lakhs/cumm  1.5 - 4.5",
        ]]
    )  # fmt: skip
    assert [b.canonical_name for b in out.extraction.biomarkers] == ["Hemoglobin", "Platelet count"]
    assert out.review == ""


async def test_an_llm_value_from_the_next_row_is_refused() -> None:
    """A model gives Quuxase the value printed on Blorbase's row, one line below (names the
    table does not know, a range that fits): the value's line labels it Blorbase, rejected;
    before, grounding let a name one or two lines above vouch for it."""
    lines = ["Quuxase  140  U/L  100-200", "Blorbase  150  U/L  100-200"]
    answer = {"biomarkers": [lab("Quuxase", 150, "150", lines[0], unit="U/L", reference_low=100,
                                 reference_high=200, reference_text="100-200")]}  # fmt: skip
    out = await read([lines], MockResponseLLM(json.dumps(answer)))
    assert not out.extraction.biomarkers
    (refused,) = out.extraction.rejected
    assert "labels the value 'Blorbase'" in refused.reason


async def test_a_count_per_microlitre_settles_an_undecided_numeral() -> None:
    """No decimal in the document says which mark is which, but a count per µL is whole:
    ``7,500 /uL`` can only be 7500; ``1,250 ng/mL`` stays refused."""
    out = await read(
        [["WBC  7,500  /uL  4,000-11,000", "Ferritin  1,250  ng/mL  30-400"]]
    )  # fmt: skip
    assert [(b.name, b.value) for b in out.extraction.biomarkers] == [("WBC", 7500)]
    assert [r.name for r in out.extraction.rejected] == ["Ferritin"]


async def test_an_llm_unit_the_line_does_not_print_is_refused() -> None:
    """``Glucose 5.4 mmol/L``: a model answering 5.4 mg/dL has a possible number in the
    wrong unit (mg/dL allows 5 to 3000); the line prints mmol/L, so it is refused."""
    line = "Glucose  5.4  mmol/L  4.0-6.0"
    answer = {"biomarkers": [lab("Glucose", 5.4, "5.4", line, unit="mg/dL")]}
    out = await read([[line]], MockResponseLLM(json.dumps(answer)))
    (refused,) = out.extraction.rejected
    assert "is not the one its line prints ('mmol/L')" in refused.reason
