"""Grouping by embeddings: near names join, units and distinguishing words veto, the
synonym table's groups stand, provenance is recorded, and any failure groups offline."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saga.steps.analytes import unit_key
from saga.steps.config import StepConfig
from saga.steps.context import Embeddings
from saga.steps.embedding_groups import clash, merge_by_similarity, text_of, units_agree
from saga.steps.errors import CircuitOpenError, PermanentError, RetryableError
from saga.steps.grouper import group, group_names
from saga.steps.models import Biomarker, Extraction, JoinedBy, ParserOutput
from saga.steps.testing import NgramEmbedder, make_context, ngram_vector

# Hand-made vectors: the first axis is "zinc", the second "glucose", the third
# "sodium", the rest noise; a name missing here is orthogonal to everything.
AXES = {
    "zinc": (1.0, 0.0, 0.0),
    "zink": (0.98, 0.0, 0.2),
    "zn": (0.95, 0.0, 0.1),
    "glucose": (0.0, 1.0, 0.0),
    "blutglukose": (0.0, 0.97, 0.24),
    "glukosewert": (0.0, 0.8, 0.6),  # near blutglukose (0.92), not glucose (0.8)
    "sodium": (0.0, 0.0, 1.0),
    "sodium urine": (0.0, 0.1, 0.99),
    "hdl cholesterol": (0.6, 0.6, 0.53),
    "ldl cholesterol": (0.6, 0.6, 0.53),
    "omega 3 index": (0.5, -0.5, 0.0),
    "omega index 3": (0.5, -0.5, 0.01),
    "selen": (0.0, -1.0, 0.0),
}


class TableEmbedder:
    """An embedder over ``AXES`` (unknown texts get a vector of their own)."""

    model = "table"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        self.calls.append(list(texts))
        vectors = [[*AXES.get(t, (0.0, 0.0, 0.0)), _own(t)] for t in texts]
        return Embeddings(vectors=vectors, model=self.model, paid=len(texts))


def _own(text: str) -> float:
    return 0.0 if text in AXES else 1.0


def parser_output(*rows: tuple[str, str]) -> ParserOutput:
    found = [Biomarker(name=n, unit=u, value=1.0, value_text="1") for n, u in rows]
    return ParserOutput.of(Extraction(biomarkers=found))


def merged(rows: Sequence[tuple[str, str]], threshold: float = 0.9) -> list[list[str]]:
    names = [n for n, _ in rows]
    drafts = group_names(names)
    texts = {text_of(n) for n in names} | {text_of(d.canonical_name) for d in drafts}
    vectors = {t: [*AXES.get(t, (0.0, 0.0, 0.0)), _own(t)] for t in texts}
    out = merge_by_similarity(names, [u for _, u in rows], drafts, vectors, threshold)
    return [d.members for d in out]


def config(threshold: float = 0.9) -> StepConfig:
    return StepConfig(embedding_model="table", embedding_threshold=threshold)


def test_near_unknown_names_with_one_unit_form_one_group() -> None:
    """Zinc, Zink and Zn in the same unit are one analyte once the table gives up."""
    assert merged([("Zinc", "ug/dL"), ("Zink", "ug/dL"), ("Zn", "µg/dl")]) == [
        ["Zinc", "Zink", "Zn"]
    ]


def test_threshold_decides() -> None:
    """Below the threshold names stay apart (zinc/zn is 0.994)."""
    assert merged([("Zinc", "ug/dL"), ("Zn", "ug/dL")], threshold=0.999) == [["Zinc"], ["Zn"]]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("Zinc", "ug/dL"), ("Zink", "umol/L")),  # no unit in common
        (("Zinc", "ug/dL"), ("Zink", "")),  # one side has no unit
        (("Glucose", "mg/dL"), ("Blutglukose", "mmol/L")),  # a table analyte, other unit
        (("Glucose", "mg/dL"), ("Blutglukose", "g/dl")),  # not a unit glucose comes in
    ],
)
def test_units_that_disagree_keep_names_apart(a: tuple[str, str], b: tuple[str, str]) -> None:
    """Similar names whose units differ stay apart: a wrong merge is a wrong value."""
    assert len(merged([a, b])) == 2


def test_unknown_name_joins_a_table_group_under_its_canonical_name() -> None:
    """A name the table lacks joins the table's group; provenance says how and how near."""
    out = merge_by_similarity(
        ["Glucose", "Blutglukose"],
        ["mg/dL", "mg/dL"],
        group_names(["Glucose", "Blutglukose"]),
        {t: [*v, 0.0] for t, v in AXES.items()},
        0.9,
    )
    [only] = out
    assert only.canonical_name == "Glucose" and only.members == ["Glucose", "Blutglukose"]
    first, joined = only.sources
    assert first.joined_by == JoinedBy.SYNONYM
    assert (joined.joined_by, joined.matched) == (JoinedBy.EMBEDDING, "Glucose")
    assert joined.score == pytest.approx(0.97, abs=0.01)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("HDL cholesterol", "LDL cholesterol"),  # distinguishing words differ
        ("Sodium", "Sodium, urine"),  # one is the other plus a qualifier
    ],
)
def test_clashing_names_stay_apart_at_any_similarity(a: str, b: str) -> None:
    """Identical vectors cannot merge names whose distinguishing words clash."""
    assert clash(text_of(a), text_of(b))
    assert len(merged([(a, "mmol/L"), (b, "mmol/L")], threshold=0.5)) == 2


def test_clash_allows_abbreviations_and_word_order() -> None:
    """An abbreviation sharing no word with its long form, or reordered words, pass."""
    assert not clash("zn", "zinc")
    assert not clash("omega 3 index", "omega index 3")
    assert clash("hemoglobin a1c", "hemoglobin")
    assert clash("free t3", "free t4")
    assert clash("fpsa", "psa") and clash("crp", "hscrp") and clash("vldl", "ldl")
    assert not clash("selen", "selenium") and not clash("triglyceride", "triglycerides")


def test_units_agree_rules() -> None:
    """Both empty agree; one empty does not; a table analyte's units bound the rest."""
    assert units_agree(frozenset(), frozenset(), None)
    assert not units_agree(frozenset({"mg/dl"}), frozenset(), None)
    assert units_agree(frozenset({"mg/dl"}), frozenset({"mg/dl", "x"}), None)
    assert not units_agree(frozenset({"mg/dl"}), frozenset({"mg/dl", "x"}), frozenset({"mg/dl"}))


def test_two_table_groups_never_merge() -> None:
    """The table says HDL and LDL differ: identical vectors do not change that."""
    assert len(merged([("HDL", "mg/dL"), ("LDL", "mg/dL")], threshold=0.0)) == 2


def test_complete_linkage_does_not_chain() -> None:
    """a~b and b~c but a far from c: c cannot reach a's group through b."""
    vectors = {"alpha": [1.0, 0.0], "bravo": [0.8, 0.6], "charlie": [0.28, 0.96]}
    names = ["alpha", "bravo", "charlie"]
    out = merge_by_similarity(names, [""] * 3, group_names(names), vectors, 0.79)
    assert [d.members for d in out] == [["alpha", "bravo"], ["charlie"]]


def test_nothing_chains_into_a_table_group() -> None:
    """A name near a member that embeddings added, but not near the table's own names,
    stays out of the table group."""
    rows = [("Glucose", "mg/dL"), ("Blutglukose", "mg/dL"), ("Glukosewert", "mg/dL")]
    assert merged(rows) == [["Glucose", "Blutglukose"], ["Glukosewert"]]


def test_result_is_deterministic() -> None:
    """The same input gives the same groups and provenance every time."""
    rows = [("Zinc", "ug/dL"), ("Selen", "ug/L"), ("Zn", "ug/dL"), ("Zink", "ug/dL")]
    assert merged(rows) == merged(rows) == [["Zinc", "Zn", "Zink"], ["Selen"]]


@pytest.mark.anyio
async def test_group_step_uses_embeddings_and_says_so() -> None:
    """With a model configured the step merges by embeddings and names the model."""
    embedder = TableEmbedder()
    ctx = make_context(step="grouper", embedder=embedder, config=config())
    out = await group(ctx, parser_output(("Zinc", "ug/dL"), ("HbA1c", "%"), ("Zink", "ug/dL")))
    assert [g.members for g in out.groups] == [["Zinc", "Zink"], ["HbA1c"]]
    assert (out.embedding_model, out.warnings) == ("table", [])
    [texts] = embedder.calls
    assert texts == ["zinc", "hemoglobin a1c", "hba1c", "zink"]


@pytest.mark.anyio
async def test_no_call_when_the_table_knows_every_name() -> None:
    """Nothing left open by the table: no embedding call, no cost."""
    embedder = TableEmbedder()
    ctx = make_context(step="grouper", embedder=embedder, config=config())
    out = await group(ctx, parser_output(("HbA1c", "%"), ("TSH", "mIU/L")))
    assert embedder.calls == [] and out.embedding_model == ""


@pytest.mark.anyio
async def test_a_model_without_an_embedder_says_so() -> None:
    """A model configured but no key to call it with: offline groups and the reason."""
    ctx = make_context(step="grouper", config=config())
    out = await group(ctx, parser_output(("Zinc", "ug/dL"), ("Zink", "ug/dL")))
    assert out.group_count == 2 and "no key" in out.warnings[0]


@pytest.mark.anyio
async def test_no_model_configured_means_offline() -> None:
    """An embedder without ``embedding_model`` set is not used."""
    embedder = TableEmbedder()
    ctx = make_context(step="grouper", embedder=embedder)
    out = await group(ctx, parser_output(("Zinc", "ug/dL"), ("Zink", "ug/dL")))
    assert embedder.calls == [] and out.group_count == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "warning"),
    [
        (CircuitOpenError("embedding", 1_900_000_000.0), "circuit embedding open"),
        (RetryableError("down"), "RetryableError"),
        (PermanentError("401 twice"), "PermanentError"),
    ],
)
async def test_failures_fall_back_to_offline_groups(error: Exception, warning: str) -> None:
    """An open circuit or a failed call never fails the grouper: offline groups, a warning."""
    embedder = NgramEmbedder(failures=[error])
    ctx = make_context(step="grouper", embedder=embedder, config=config())
    out = await group(ctx, parser_output(("Zinc", "ug/dL"), ("Zink", "ug/dL"), ("A1C", "%")))
    assert [g.members for g in out.groups] == [["Zinc"], ["Zink"], ["A1C"]]
    assert out.embedding_model == "" and warning in out.warnings[0]
    assert len(embedder.calls) == 1


def test_ngram_stand_in_is_deterministic_and_spelling_based() -> None:
    """The stand-in vectors repeat exactly and rate a typo nearer than another word."""
    assert ngram_vector("cholesterol") == ngram_vector("cholesterol")

    def cos(a: str, b: str) -> float:
        va, vb = ngram_vector(a), ngram_vector(b)
        dot = sum(x * y for x, y in zip(va, vb, strict=True))
        return dot / (sum(x * x for x in va) * sum(y * y for y in vb)) ** 0.5

    assert cos("cholesterol", "cholestrol") > cos("cholesterol", "creatinine")


POOL = [
    ("Glucose", "mg/dL"), ("Blutglukose", "mg/dL"), ("Glukose", "mmol/L"), ("HDL", "mg/dL"),
    ("LDL cholesterol", "mg/dL"), ("HDL Chol", "mg/dL"), ("Zinc", "ug/dL"), ("Zink", "ug/dL"),
    ("Zn", "umol/L"), ("Sodium", "mmol/L"), ("Sodium, urine", "mmol/L"), ("Natrium", "mmol/L"),
    ("PSA", "ng/mL"), ("fPSA", "ng/mL"), ("Selen", "ug/L"), ("Selenium", "ug/L"),
    ("Neutrophils", "%"), ("Neutrophil count", "/nL"), ("Omega-3 Index", "%"),
    ("Omega-6 Index", "%"), ("Hemoglobin", "g/dL"), ("Hemoglobin A1c", "%"), ("Mystery", ""),
]  # fmt: skip


@given(
    picks=st.lists(st.sampled_from(POOL), min_size=1, max_size=12),
    seed=st.integers(0, 10_000),
    threshold=st.floats(-1.0, 1.0),
)
@settings(max_examples=150, deadline=None)
def test_merges_never_break_the_rules(
    picks: list[tuple[str, str]], seed: int, threshold: float
) -> None:
    """Whatever the vectors and threshold: every result is in exactly one group, no two
    table groups merge, and every embedding merge has agreeing units and no clash."""
    import random

    rng = random.Random(seed)
    names = [n for n, _ in picks]
    units = [u for _, u in picks]
    drafts = group_names(names)
    texts = {text_of(n) for n in names} | {text_of(d.canonical_name) for d in drafts}
    vectors = {t: [rng.uniform(-1, 1) for _ in range(4)] for t in sorted(texts)}
    out = merge_by_similarity(names, units, drafts, vectors, threshold)
    assert sorted(i for d in out for i in d.indexes) == list(range(len(names)))
    assert merge_by_similarity(names, units, group_names(names), vectors, threshold) == out
    for d in out:
        parts = [o for o in drafts if set(o.indexes) <= set(d.indexes)]
        assert sum(o.known for o in parts) <= 1
        if len(parts) == 1:
            continue
        assert any(s.joined_by == JoinedBy.EMBEDDING for s in d.sources)
        part_units = [{unit_key(units[i]) for i in o.indexes if units[i]} for o in parts]
        for k, own in enumerate(part_units):
            others = set().union(*(u for j, u in enumerate(part_units) if j != k))
            assert own & others or not any(part_units)
        for k, a in enumerate(parts):
            for b in parts[k + 1 :]:
                ta = [text_of(m) for m in a.members]
                tb = [text_of(m) for m in b.members]
                assert not any(clash(x, y) for x in ta for y in tb)
