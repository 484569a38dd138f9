"""Grouper: equivalent biomarkers under one canonical name, offline by default.

A name joins a group by, in order:

1. the curated synonym table (``saga.steps.synonyms``) after normalisation;
2. a fuzzy match (rapidfuzz ``token_sort_ratio`` >= ``FUZZY_THRESHOLD``) against the
   table's aliases, then against the groups formed so far, provided the
   discriminating words (short ones, ones with digits) agree exactly;
3. otherwise it opens a group named as the document first wrote it.

With ``StepConfig.embedding_model`` and an embedder, groups the table does not know
may then join a table group or each other by embedding similarity
(``saga.steps.embedding_groups``); with ``StepConfig.llm_group_names`` and an LLM,
the names of groups the table does not know are offered to the model
(``saga.steps.group_names``). Neither ever fails the step: on any error the offline
groups stand, and the output says why (``GrouperOutput.warnings``). Every member
records how it joined its group (``BiomarkerGroup.sources``).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from saga.steps.context import StepContext
from saga.steps.group_draft import Draft
from saga.steps.models import (
    Biomarker,
    BiomarkerGroup,
    GrouperOutput,
    JoinedBy,
    MemberSource,
    ParserOutput,
)
from saga.steps.normalize import discriminators, name_key
from saga.steps.synonyms import alias_index

FUZZY_THRESHOLD = 90
"""Minimum rapidfuzz token_sort_ratio (0-100) on normalised names: catches typos and
plural forms ("Triglyceride", "Cholestrol"), rejects "Creatine" vs "Creatinine" (89)."""


def fuzzy_match(key: str, candidates: Sequence[str]) -> tuple[str, float] | None:
    """The best candidate key within the threshold whose discriminators agree, with its
    score (0-100), or None."""
    from rapidfuzz import fuzz, process

    wanted = discriminators(key)
    for candidate, score, _index in process.extract(
        key, candidates, scorer=fuzz.token_sort_ratio, score_cutoff=FUZZY_THRESHOLD, limit=5
    ):
        if discriminators(candidate) == wanted:
            return str(candidate), float(score)
    return None


def group_names(names: Sequence[str]) -> list[Draft]:
    """Group the names (duplicates allowed) in order of first appearance.

    ``Draft.indexes`` are positions in ``names``. A pure function: the table tests
    run it directly.
    """
    index = alias_index()
    drafts: list[Draft] = []
    by_canonical: dict[str, Draft] = {}
    by_key: dict[str, tuple[Draft, MemberSource]] = {}
    for position, name in enumerate(names):
        key = name_key(name) or name.lower()
        placed = by_key.get(key)
        if placed is None:
            placed = by_key[key] = _place(key, name, index, by_canonical, drafts)
            placed[0].keys.append(key)
        draft, source = placed
        if name not in draft.members:
            if draft.members and source.joined_by == JoinedBy.FIRST:  # same normalised name
                source = MemberSource(
                    name=name, joined_by=JoinedBy.FUZZY, score=1.0, matched=draft.members[0]
                )
            draft.members.append(name)
            draft.sources.append(msgspec.structs.replace(source, name=name))
        draft.indexes.append(position)
    return drafts


def _place(
    key: str, name: str, index: dict[str, str], by_canonical: dict[str, Draft], drafts: list[Draft]
) -> tuple[Draft, MemberSource]:
    canonical = index.get(key)
    source = MemberSource(name=name, joined_by=JoinedBy.SYNONYM)
    if canonical is None and (near := fuzzy_match(key, list(index))) is not None:
        canonical = index[near[0]]
        source = _fuzzy(name, near)
    if canonical is not None:
        if canonical not in by_canonical:
            by_canonical[canonical] = Draft(canonical, known=True)
            drafts.append(by_canonical[canonical])
        return by_canonical[canonical], source
    unknown = [draft for draft in drafts if not draft.known]
    keys = [k for draft in unknown for k in draft.keys]
    if (near := fuzzy_match(key, keys)) is not None:
        return next(draft for draft in unknown if near[0] in draft.keys), _fuzzy(name, near)
    draft = Draft(name, known=False)
    drafts.append(draft)
    return draft, MemberSource(name=name, joined_by=JoinedBy.FIRST)


def _fuzzy(name: str, near: tuple[str, float]) -> MemberSource:
    return MemberSource(
        name=name, joined_by=JoinedBy.FUZZY, score=round(near[1] / 100, 4), matched=near[0]
    )


def build_groups(biomarkers: Sequence[Biomarker], drafts: Sequence[Draft]) -> list[BiomarkerGroup]:
    """The output groups of ``drafts`` over ``biomarkers`` (document order inside each)."""
    return [
        BiomarkerGroup(
            canonical_name=draft.canonical_name,
            members=list(draft.members),
            biomarkers=[biomarkers[i] for i in sorted(draft.indexes)],
            sources=list(draft.sources),
        )
        for draft in drafts
    ]


async def group(ctx: StepContext, inp: ParserOutput) -> GrouperOutput:
    """Group the parser's biomarkers: offline, then by embeddings and LLM names if configured."""
    biomarkers = inp.extraction.biomarkers
    drafts = group_names([b.name for b in biomarkers])
    model, warnings = "", []
    if ctx.config.embedding_model and ctx.embedder is None:
        warnings.append("embeddings unavailable (no key to call the model with): grouped offline")
    elif ctx.config.embedding_model and ctx.embedder is not None:
        from saga.steps.embedding_groups import embed_and_merge

        drafts, model, warning = await embed_and_merge(ctx, ctx.embedder, biomarkers, drafts)
        warnings += [warning] if warning else []
    if ctx.config.llm_group_names and ctx.llm is not None:
        from saga.steps.group_names import enrich

        drafts = await enrich(ctx, ctx.llm, drafts)
    groups = build_groups(biomarkers, drafts)
    ctx.log.info(
        "biomarkers grouped",
        biomarkers=len(biomarkers),
        groups=len(groups),
        unknown=sum(not d.known for d in drafts),
        embedding_model=model,
    )
    return GrouperOutput(
        group_count=len(groups), groups=groups, embedding_model=model, warnings=warnings
    )
