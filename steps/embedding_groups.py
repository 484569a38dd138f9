"""Grouping by embedding similarity, on top of the offline groups.

The offline groups stand: a synonym-table group is never split, and two table
groups never merge (the table says they are different analytes). Embeddings let a
group the table does not know join one table group, or other unknown groups, when
all of these hold:

1. **near**: each of its names has cosine similarity >= the threshold with some name
   of the table group (its canonical name counts), or with *every* name of the
   unknown group (complete linkage: a chain of near names never links two far ones);
2. **units agree**: both groups carry units (``unit_key``) and share one (for a table
   analyte, every unit is also one it is reported in, ``analytes.LIMITS``), or neither
   has a unit. So "Neutrophils" in % and "Neutrophil count" in 10^9/L stay apart, and
   so does "Blutglukose" in mmol/L from "Glucose" in mg/dL: left for a person to see;
3. **no clash of distinguishing words**: short and digit words (HDL/LDL, B12/D,
   T3/T4) agree where both names have some, no name is another plus a qualifier
   ("Sodium, urine" vs "Sodium", "Hemoglobin A1c" vs "Hemoglobin"), and no word is
   another behind a one- or two-letter prefix (fPSA vs PSA, hsCRP vs CRP).

A wrong merge is a wrong value, so every doubt leaves names apart. Candidate pairs
are taken by falling similarity, ties by position: the result is deterministic.
Texts are embedded in their normalised form (``normalize_name``), which is also what
the embedder caches them under, so one name is paid for once across records.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import anyio.to_thread

from saga.steps.analytes import limits_for, unit_key
from saga.steps.context import Embedder, StepContext
from saga.steps.errors import CircuitOpenError, StepError
from saga.steps.group_draft import Draft
from saga.steps.models import Biomarker, JoinedBy, MemberSource
from saga.steps.normalize import discriminators, normalize_name

Vector = Sequence[float]


def text_of(name: str) -> str:
    """What is embedded (and cached) for a name: its normalised form."""
    return normalize_name(name) or " ".join(name.lower().split())


NEUTRAL_WORDS = frozenset(("gesamt", "total", "i", "im", "quantitativ", "quantitative"))
"""Words that qualify nothing: an unqualified result is the total, in serum (German
``i.S.``, ``im Serum``), so "CK gesamt" and "Kreatinin i.S." are not qualified names."""


def clash(a: str, b: str) -> bool:
    """Two normalised names that must not be grouped whatever their similarity."""
    wa, wb = set(a.split()) - NEUTRAL_WORDS, set(b.split()) - NEUTRAL_WORDS
    if wa == wb:
        return False
    if wa < wb or wb < wa:  # one is the other plus a qualifier
        return True
    if any(_prefixed(x, y) or _prefixed(y, x) for x in wa - wb for y in wb - wa):
        return True
    da, db = discriminators(" ".join(sorted(wa))), discriminators(" ".join(sorted(wb)))
    if da and db and da != db:
        return True
    # a shared word, and a distinguishing word on one side only ("hemoglobin a1c" and
    # "glycated hemoglobin" are table names; two unknown names like them stay apart)
    return bool((da or db) and da != db and wa & wb)


def _prefixed(word: str, base: str) -> bool:
    """``word`` is ``base`` behind a one- or two-letter qualifier: fPSA (free), hsCRP
    (high-sensitivity), VLDL (very low density), iCa (ionised)."""
    return len(base) >= 2 and 1 <= len(word) - len(base) <= 2 and word.endswith(base)


def units_agree(a: frozenset[str], b: frozenset[str], allowed: frozenset[str] | None) -> bool:
    """Units of two groups that may hold one analyte (``allowed``: a table analyte's)."""
    if not a and not b:
        return True
    if allowed is not None and not (a | b) <= allowed:
        return False
    return bool(a & b)


def _unit(vector: Vector) -> list[float]:
    norm = math.sqrt(sum(map(operator.mul, vector, vector))) or 1.0
    return [x / norm for x in vector]


@dataclass
class _Cluster:
    head: int
    """The draft whose name the cluster keeps (its table draft, else its first)."""
    drafts: list[int]
    known: bool
    texts: list[str]
    """Every name's text (the clash rule holds against each one)."""
    anchors: list[str]
    """The texts similarity is measured against: a table group's own names (never the
    names embeddings added, so nothing chains into it); an unknown group's every name."""
    units: frozenset[str]


@dataclass
class _Space:
    vectors: Mapping[str, list[float]]
    threshold: float
    memo: dict[tuple[str, str], float] = field(default_factory=dict)

    def sim(self, a: str, b: str) -> float:
        if a == b:
            return 1.0
        pair = (a, b) if a < b else (b, a)
        found = self.memo.get(pair)
        if found is None:
            found = self.memo[pair] = sum(map(operator.mul, self.vectors[a], self.vectors[b]))
        return found

    def linkage(self, a: _Cluster, b: _Cluster) -> float:
        """Every name of an unknown side near some table name; else every pair near."""
        if a.known or b.known:
            known, other = (a, b) if a.known else (b, a)
            return min(max(self.sim(u, k) for k in known.anchors) for u in other.texts)
        return min(self.sim(x, y) for x in a.texts for y in b.texts)


def merge_by_similarity(
    names: Sequence[str],
    units: Sequence[str],
    drafts: Sequence[Draft],
    vectors: Mapping[str, Vector],
    threshold: float,
) -> list[Draft]:
    """``drafts`` (over ``names``, whose results have ``units``) merged by similarity.

    A pure function: ``vectors`` maps ``text_of`` every member and table name to a vector."""
    space = _Space({t: _unit(v) for t, v in vectors.items()}, threshold)
    cluster_of = [_cluster(i, d, units) for i, d in enumerate(drafts)]
    canon = {i: d.canonical_name for i, d in enumerate(drafts) if d.known}
    pairs = [
        (-space.linkage(cluster_of[i], cluster_of[j]), i, j)
        for i in range(len(drafts))
        for j in range(i + 1, len(drafts))
        if not (drafts[i].known and drafts[j].known)
    ]
    for negative, i, j in sorted(pairs):
        if -negative < threshold:
            break
        a, b = cluster_of[i], cluster_of[j]
        if a is b or not _allowed(space, a, b, canon):
            continue
        keep, join = (a, b) if a.known or (not b.known and a.head < b.head) else (b, a)
        keep.drafts += join.drafts
        keep.texts += [t for t in join.texts if t not in keep.texts]
        if not keep.known:
            keep.anchors = keep.texts
        keep.units |= join.units
        for d in join.drafts:
            cluster_of[d] = keep
    return _drafts(names, drafts, cluster_of, space)


def _allowed(space: _Space, a: _Cluster, b: _Cluster, canon: Mapping[int, str]) -> bool:
    if a.known and b.known:
        return False
    known = a if a.known else b if b.known else None
    limits = limits_for(canon[known.head]) if known else None
    if not units_agree(a.units, b.units, frozenset(limits) if limits else None):
        return False
    if any(clash(x, y) for x in a.texts for y in b.texts):
        return False
    return space.linkage(a, b) >= space.threshold


def _texts(draft: Draft) -> list[str]:
    """A draft's texts: a table group's canonical name first, then its members'."""
    texts = [text_of(draft.canonical_name)] if draft.known else []
    return texts + [t for t in dict.fromkeys(map(text_of, draft.members)) if t not in texts]


def _cluster(i: int, draft: Draft, units: Sequence[str]) -> _Cluster:
    texts = _texts(draft)
    found = frozenset(unit_key(units[p]) for p in draft.indexes if units[p].strip())
    return _Cluster(i, [i], draft.known, texts, list(texts), found)


def _drafts(
    names: Sequence[str], drafts: Sequence[Draft], clusters: Sequence[_Cluster], space: _Space
) -> list[Draft]:
    first: dict[str, int] = {}
    for position, name in enumerate(names):
        first.setdefault(name, position)
    out: list[Draft] = []
    seen: set[int] = set()
    for cluster in clusters:
        if id(cluster) in seen:
            continue
        seen.add(id(cluster))
        head = drafts[cluster.head]
        merged = Draft(head.canonical_name, known=head.known)
        anchors = _texts(head)
        rows: list[tuple[int, str, MemberSource]] = []
        for d in sorted(cluster.drafts):
            draft = drafts[d]
            merged.keys += draft.keys
            merged.indexes += draft.indexes
            for member, source in zip(draft.members, draft.sources, strict=True):
                how = source if d == cluster.head else _joined(member, anchors, head, space)
                rows.append((first.get(member, len(names)), member, how))
        for _, member, source in sorted(rows, key=lambda row: row[0]):
            merged.members.append(member)
            merged.sources.append(source)
        out.append(merged)
    return sorted(out, key=lambda d: min(d.indexes, default=0))


def _joined(member: str, anchors: Sequence[str], head: Draft, space: _Space) -> MemberSource:
    text = text_of(member)
    score, best = max((space.sim(text, a), a) for a in anchors)
    raw = {text_of(n): n for n in (*reversed(head.members), head.canonical_name)}
    matched = raw.get(best, best)
    return MemberSource(
        name=member, joined_by=JoinedBy.EMBEDDING, score=round(score, 4), matched=matched
    )


async def embed_and_merge(
    ctx: StepContext, embedder: Embedder, biomarkers: Sequence[Biomarker], drafts: list[Draft]
) -> tuple[list[Draft], str, str]:
    """(drafts, model used or "", warning or ""): the offline drafts on any failure."""
    if len(drafts) < 2 or all(d.known for d in drafts):
        return drafts, "", ""  # nothing the table left open: no call, no cost
    texts: list[str] = []
    for draft in drafts:
        for name in ((draft.canonical_name,) if draft.known else ()) + tuple(draft.members):
            if (text := text_of(name)) not in texts:
                texts.append(text)
    try:
        found = await embedder.embed(texts)
        if len(found.vectors) != len(texts):
            raise ValueError("the embedder answered a different number of vectors")
    except CircuitOpenError as exc:
        ctx.log.warning("embedding grouping skipped; circuit open", breaker=exc.dependency)
        why = f"circuit {exc.dependency} open"
        return drafts, "", f"embeddings unavailable ({why}): grouped offline"
    except (StepError, ValueError) as exc:  # never fail the grouper for an optional model
        ctx.log.warning("embedding grouping failed; grouped offline", error=type(exc).__name__)
        return drafts, "", f"embeddings unavailable ({type(exc).__name__}): grouped offline"
    names = [b.name for b in biomarkers]
    vectors = dict(zip(texts, found.vectors, strict=True))
    units = [b.unit for b in biomarkers]
    threshold = ctx.config.embedding_threshold
    # Pure Python dot products: ~0.5 s for a 200-name document at 1536 dimensions, so
    # off the event loop (other steps' heartbeats run there).
    merged = await anyio.to_thread.run_sync(
        merge_by_similarity, names, units, drafts, vectors, threshold
    )
    ctx.log.info(
        "grouped by embeddings",
        model=found.model,
        texts=len(texts),
        paid=found.paid,
        merged=len(drafts) - len(merged),
    )
    return merged, found.model, ""
