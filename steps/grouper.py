"""Grouper: equivalent biomarkers under one canonical name, offline by default.

A name joins a group by, in order:

1. the curated synonym table (``saga.steps.synonyms``) after normalisation;
2. a fuzzy match (rapidfuzz ``token_sort_ratio`` >= ``FUZZY_THRESHOLD``) against the
   table's aliases, then against the groups formed so far, provided the
   discriminating words (short ones, ones with digits) agree exactly;
3. otherwise it opens a group named as the document first wrote it.

With ``StepConfig.llm_group_names`` and an LLM, the names of groups the table
does not know are offered to the model (``saga.steps.group_names``); that
enrichment never fails the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from saga.steps.context import StepContext
from saga.steps.models import Biomarker, BiomarkerGroup, GrouperOutput, ParserOutput
from saga.steps.normalize import discriminators, name_key
from saga.steps.synonyms import alias_index

FUZZY_THRESHOLD = 90
"""Minimum rapidfuzz token_sort_ratio (0-100) on normalised names: catches typos and
plural forms ("Triglyceride", "Cholestrol"), rejects "Creatine" vs "Creatinine" (89)."""


@dataclass
class Draft:
    """A group being built: its name, whether the table named it, its members."""

    canonical_name: str
    known: bool
    keys: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    indexes: list[int] = field(default_factory=list)


def fuzzy_match(key: str, candidates: Sequence[str]) -> str | None:
    """The best candidate key within the threshold whose discriminators agree, or None."""
    from rapidfuzz import fuzz, process

    wanted = discriminators(key)
    for candidate, _score, _index in process.extract(
        key, candidates, scorer=fuzz.token_sort_ratio, score_cutoff=FUZZY_THRESHOLD, limit=5
    ):
        if discriminators(candidate) == wanted:
            return str(candidate)
    return None


def group_names(names: Sequence[str]) -> list[Draft]:
    """Group the names (duplicates allowed) in order of first appearance.

    ``Draft.indexes`` are positions in ``names``. A pure function: the table tests
    run it directly.
    """
    index = alias_index()
    drafts: list[Draft] = []
    by_canonical: dict[str, Draft] = {}
    by_key: dict[str, Draft] = {}
    for position, name in enumerate(names):
        key = name_key(name) or name.lower()
        draft = by_key.get(key)
        if draft is None:
            draft = _place(key, name, index, by_canonical, drafts)
            by_key[key] = draft
            draft.keys.append(key)
        if name not in draft.members:
            draft.members.append(name)
        draft.indexes.append(position)
    return drafts


def _place(
    key: str, name: str, index: dict[str, str], by_canonical: dict[str, Draft], drafts: list[Draft]
) -> Draft:
    canonical = index.get(key)
    if canonical is None and (alias := fuzzy_match(key, list(index))) is not None:
        canonical = index[alias]
    if canonical is not None:
        if canonical not in by_canonical:
            by_canonical[canonical] = Draft(canonical, known=True)
            drafts.append(by_canonical[canonical])
        return by_canonical[canonical]
    unknown = [draft for draft in drafts if not draft.known]
    keys = [k for draft in unknown for k in draft.keys]
    if (near := fuzzy_match(key, keys)) is not None:
        return next(draft for draft in unknown if near in draft.keys)
    draft = Draft(name, known=False)
    drafts.append(draft)
    return draft


def build_groups(biomarkers: Sequence[Biomarker], drafts: Sequence[Draft]) -> list[BiomarkerGroup]:
    """The output groups of ``drafts`` over ``biomarkers`` (document order inside each)."""
    return [
        BiomarkerGroup(
            canonical_name=draft.canonical_name,
            members=list(draft.members),
            biomarkers=[biomarkers[i] for i in sorted(draft.indexes)],
        )
        for draft in drafts
    ]


async def group(ctx: StepContext, inp: ParserOutput) -> GrouperOutput:
    """Group the parser's biomarkers; optional LLM names for groups the table lacks."""
    biomarkers = inp.extraction.biomarkers
    drafts = group_names([b.name for b in biomarkers])
    if ctx.config.llm_group_names and ctx.llm is not None:
        from saga.steps.group_names import enrich

        drafts = await enrich(ctx, ctx.llm, drafts)
    groups = build_groups(biomarkers, drafts)
    ctx.log.info(
        "biomarkers grouped",
        biomarkers=len(biomarkers),
        groups=len(groups),
        unknown=sum(not d.known for d in drafts),
    )
    return GrouperOutput(group_count=len(groups), groups=groups)
