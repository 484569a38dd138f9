"""Grouping: normalisation, the synonym table, fuzzy matching, the step and LLM names."""

from __future__ import annotations

import pytest
from rapidfuzz import fuzz

from saga.steps.config import StepConfig
from saga.steps.errors import CircuitOpenError, RetryableError
from saga.steps.grouper import FUZZY_THRESHOLD, group, group_names
from saga.steps.models import Biomarker, Extraction, ParserOutput
from saga.steps.normalize import name_key, normalize_name
from saga.steps.synonyms import SYNONYMS, alias_index, canonical_name
from saga.steps.testing import ManualContext, ScriptedLLM, make_context


def grouping(*names: str) -> list[tuple[str, list[str]]]:
    return [(d.canonical_name, d.members) for d in group_names(names)]


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("Glycated Haemoglobin (HbA1c), serum", "glycated hemoglobin hba1c"),
        ("Glucose (mg/dL)", "glucose"),
        ("WBC's", "wbc"),
        ("Oestradiol", "estradiol"),
        ("Leucocytes", "leukocytes"),
        ("Vitamin D, 25-OH", "vitamin d 25 oh"),
    ],
)
def test_normalize_name(raw: str, normal: str) -> None:
    """Case, accents, British spelling, unit brackets, punctuation and filler words fold away."""
    assert normalize_name(raw) == normal


def test_name_key_ignores_word_order() -> None:
    """ "Cholesterol, Total" and "Total cholesterol" share a key."""
    assert name_key("Cholesterol, Total") == name_key("total CHOLESTEROL")


@pytest.mark.parametrize(
    "family",
    [
        (
            "HbA1c",
            "Hemoglobin A1c",
            "Glycated haemoglobin",
            "A1C",
            "HGB A1c",
            "Glycosylated Hb A1c",
        ),
        ("Total cholesterol", "Cholesterol, Total", "CHOLESTEROL", "Cholestrol total"),
        ("Vitamin D", "25-OH Vitamin D", "Vitamin D, 25-Hydroxy", "25-Hydroxyvitamin D"),
        ("WBC", "White blood cells", "Leucocytes", "White Cell Count"),
        ("ALT", "ALT (SGPT)", "Alanine aminotransferase", "SGPT"),
        ("TSH", "Thyroid Stimulating Hormone", "Thyrotropin"),
        ("Triglycerides", "Triglyceride", "TRIG"),
        ("Glucose", "Glucose, Fasting", "Fasting Glucose", "Glucose (mg/dL)"),
    ],
)
def test_equivalent_names_form_one_group(family: tuple[str, ...]) -> None:
    """Synonyms, abbreviations, spelling, order and typos of one analyte group together."""
    [(_, members)] = grouping(*family)
    assert members == list(family)


@pytest.mark.parametrize(
    "pair",
    [
        ("HDL cholesterol", "LDL cholesterol"),
        ("Vitamin B12", "Vitamin D"),
        ("Free T3", "Free T4"),
        ("Hemoglobin", "Hemoglobin A1c"),
        ("CRP", "hs-CRP"),
        ("Iron", "Ferritin"),
        ("Creatinine", "Creatine"),
        ("Non-HDL cholesterol", "HDL cholesterol"),
        ("Sodium", "Sodium, urine"),
        ("Omega-3 Index", "Omega-6 Index"),
        ("Neutrophils", "Neutrophils absolute"),
    ],
)
def test_near_misses_stay_apart(pair: tuple[str, str]) -> None:
    """Names that look alike but are different analytes never share a group."""
    assert len(grouping(*pair)) == 2


def test_canonical_names_come_from_the_table() -> None:
    """A table analyte's group is named canonically; an unknown one as first written."""
    assert grouping("hba1c", "Omega-3 Index", "omega 3 index") == [
        ("Hemoglobin A1c", ["hba1c"]),
        ("Omega-3 Index", ["Omega-3 Index", "omega 3 index"]),
    ]


def test_fuzzy_threshold_sits_between_typos_and_different_words() -> None:
    """A common typo scores above the threshold; creatine/creatinine below it."""
    assert fuzz.token_sort_ratio("cholestrol total", "cholesterol total") >= FUZZY_THRESHOLD
    assert fuzz.token_sort_ratio("creatine", "creatinine") < FUZZY_THRESHOLD
    assert grouping("Cholestrol, totl") == [("Total cholesterol", ["Cholestrol, totl"])]


def test_synonym_table_is_consistent_and_broad() -> None:
    """At least 40 analytes, no alias claimed by two, every canonical name maps to itself."""
    assert len(SYNONYMS) >= 40
    index = alias_index()
    assert all(canonical_name(name) == name for name in SYNONYMS)
    assert len(index) > 3 * len(SYNONYMS)


def test_duplicates_keep_one_member_and_every_result() -> None:
    """The same name twice is one member; indexes cover both results."""
    [draft] = group_names(["HbA1c", "HbA1c"])
    assert (draft.members, draft.indexes) == (["HbA1c"], [0, 1])


def parser_output(*names: str) -> ParserOutput:
    biomarkers = [Biomarker(name=n, value=float(i), value_text=str(i)) for i, n in enumerate(names)]
    return ParserOutput.of(Extraction(biomarkers=biomarkers))


@pytest.mark.anyio
async def test_group_step_keeps_document_order() -> None:
    """Groups in order of first appearance; each group's results in document order."""
    out = await group(make_context(step="grouper"), parser_output("A1C", "LDL", "HbA1c", "Zinc"))
    assert out.group_count == 3
    assert [g.canonical_name for g in out.groups] == ["Hemoglobin A1c", "LDL cholesterol", "Zinc"]
    assert [b.value for b in out.groups[0].biomarkers] == [0.0, 2.0]


@pytest.mark.anyio
async def test_group_step_with_no_biomarkers() -> None:
    """No biomarkers, no groups."""
    out = await group(make_context(step="grouper"), parser_output())
    assert (out.group_count, out.groups) == (0, [])


def llm_group_ctx(*replies: str | Exception) -> tuple[ScriptedLLM, ManualContext]:
    llm = ScriptedLLM(list(replies))
    return llm, make_context(step="grouper", llm=llm, config=StepConfig(llm_group_names=True))


@pytest.mark.anyio
async def test_llm_names_unknown_groups_and_merges_into_the_table() -> None:
    """Model names join table groups or merge unknown groups; known groups are not asked."""
    llm, ctx = llm_group_ctx(
        '{"names": {"Glyco Hb": "HbA1c", "Zn": "Zinc", "Zinc, serum": "Zinc"}}'
    )
    out = await group(ctx, parser_output("HbA1c", "Glyco Hb", "Zn", "Zinc, serum"))
    assert [(g.canonical_name, g.members) for g in out.groups] == [
        ("Hemoglobin A1c", ["HbA1c", "Glyco Hb"]),
        ("Zinc", ["Zn", "Zinc, serum"]),
    ]
    [(purpose, messages)] = llm.calls
    assert purpose == "group-names" and "HbA1c" not in messages[1]["content"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "reply",
    [
        "no idea",
        '{"names": {"Zn": ""}}',
        '{"names": ["Zinc"]}',
        RetryableError("provider down"),
        CircuitOpenError("llm", 1_900_000_000.0),
    ],
)
async def test_llm_group_names_failure_keeps_offline_names(reply: str | Exception) -> None:
    """Garbage, invalid names or port errors never fail the grouper: offline names stay."""
    _, ctx = llm_group_ctx(reply)
    out = await group(ctx, parser_output("Zn", "HbA1c"))
    assert [g.canonical_name for g in out.groups] == ["Zn", "Hemoglobin A1c"]


@pytest.mark.anyio
async def test_llm_not_called_when_every_group_is_known() -> None:
    """With only table analytes there is nothing to ask the model."""
    llm, ctx = llm_group_ctx()
    await group(ctx, parser_output("HbA1c", "TSH"))
    assert llm.calls == []
