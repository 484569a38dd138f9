"""Optional LLM canonicalisation of group names the synonym table does not know.

The model gets the unknown names only (no values, no page text) and answers
``{"names": {"<name>": "<canonical name>"}}``. A name the model maps to a
table analyte joins that group; names mapped to the same new name merge.
Anything unusable (an error from the port, garbage, an open circuit) keeps the
offline names: enrichment never fails the grouper.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated

import msgspec

from saga.steps.context import LLM, StepContext
from saga.steps.extract_llm import json_part
from saga.steps.group_draft import Draft
from saga.steps.models import JoinedBy, MemberSource
from saga.steps.synonyms import canonical_name

PURPOSE = "group-names"
CanonicalName = Annotated[str, msgspec.Meta(min_length=1, max_length=80)]


class Answer(msgspec.Struct, frozen=True):
    """The model's answer: original group name -> canonical name."""

    names: dict[str, CanonicalName]


_PROMPT = (
    "You name clinical lab analytes. For each name in the list, give the standard "
    'English name of the analyte it denotes. Reply with JSON only: {"names": '
    '{"<name as given>": "<standard name>"}}. Keep a name unchanged when unsure.'
)


async def enrich(ctx: StepContext, llm: LLM, drafts: Sequence[Draft]) -> list[Draft]:
    """Drafts with model-given names for unknown groups; the offline drafts on any failure."""
    unknown = [draft.canonical_name for draft in drafts if not draft.known]
    if not unknown:
        return list(drafts)
    messages = [
        {"role": "system", "content": _PROMPT},
        {"role": "user", "content": json.dumps(unknown)},
    ]
    try:
        completion = await llm.complete(messages, purpose=PURPOSE)
        text = completion.text
        answer = msgspec.json.decode(json_part(text) or text, type=Answer)
    except Exception as exc:  # enrichment is best effort: never fail the step for it
        ctx.log.warning("llm group names unusable; keeping offline names", error=type(exc).__name__)
        return list(drafts)
    return apply_names(drafts, answer.names)


def apply_names(drafts: Sequence[Draft], names: Mapping[str, str]) -> list[Draft]:
    """Rename unknown drafts by ``names`` and merge those that now mean the same analyte."""
    merged: dict[str, Draft] = {}
    for draft in drafts:
        name, known, sources = draft.canonical_name, draft.known, draft.sources
        if not known and (given := names.get(name, "").strip()):
            table = canonical_name(given)
            name, known = (table, True) if table else (given, False)
            sources = [
                MemberSource(name=s.name, joined_by=JoinedBy.LLM, matched=given) for s in sources
            ]
        merge_key = f"table:{name}" if known else f"name:{name.casefold()}"
        target = merged.setdefault(merge_key, Draft(name, known=known))
        target.keys.extend(draft.keys)
        for member, source in zip(draft.members, sources, strict=True):
            if member not in target.members:
                target.members.append(member)
                target.sources.append(source)
        target.indexes.extend(draft.indexes)
    return list(merged.values())
