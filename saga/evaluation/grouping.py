"""Score the grouper on the labelled names (``grouping_truth``): pairwise precision and
recall of the offline grouper (synonym table + fuzzy) and of the embedding grouper.

All names go through the grouper step as one document (each with its unit). A pair of
names is *true* when the set puts them under one analyte, *found* when the grouper
does. Precision = correct found pairs / found pairs (a miss here is a wrong merge: two
analytes under one name); recall = correct found pairs / true pairs.

The embedding grouper runs on the deterministic stand-in vectors
(``saga.steps.testing.ngram_vector``: hashed character trigrams, no meaning) unless
a real model is named (``--embedding-model``: litellm with ``SAGA_LLM_API_KEY``, no
cache, costs money).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from itertools import combinations
from typing import Any

import msgspec
import structlog

from saga.evaluation.grouping_truth import LabelledName, labelled_names
from saga.steps.config import StepConfig
from saga.steps.context import Embedder, Embeddings
from saga.steps.errors import RetryableError
from saga.steps.grouper import group
from saga.steps.models import Biomarker, Extraction, ParserOutput
from saga.steps.testing import NgramEmbedder, as_step_context, make_context

STAND_IN = "ngram-stand-in"
"""The model name the report gives the stand-in vectors."""


def _drop(_logger: Any, _method: str, _event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    raise structlog.DropEvent


_QUIET = structlog.wrap_logger(structlog.PrintLogger(), processors=[_drop])


class WrongMerge(msgspec.Struct, frozen=True, kw_only=True):
    """Two names of different analytes the grouper put together."""

    a: str
    b: str
    a_group: str
    b_group: str


class GrouperScore(msgspec.Struct, frozen=True, kw_only=True):
    """One grouper's figures on the set."""

    grouper: str
    """``offline`` or ``embedding``."""
    model: str
    """The embedding model ("" offline; ``ngram-stand-in`` for the stand-in vectors)."""
    threshold: float
    groups_found: int
    true_pairs: int
    found_pairs: int
    correct_pairs: int
    precision: float
    recall: float
    wrong_merges: list[WrongMerge]
    warnings: list[str]
    """The grouper's own (an embedding call that failed falls back to offline)."""


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """``saga eval --grouping --json``."""

    names: int
    analytes: int
    scores: list[GrouperScore]


async def evaluate_grouping(
    threshold: float, embedder: Embedder | None = None, truth: Sequence[LabelledName] = ()
) -> Report:
    """Both groupers on the labelled set; the embedding one with ``embedder`` (default:
    the stand-in vectors) at ``threshold``."""
    names = list(truth) or labelled_names()
    offline = await score_grouper(names, StepConfig(), None)
    embedder = embedder or NgramEmbedder(model=STAND_IN)
    config = StepConfig(embedding_model=embedder.model, embedding_threshold=threshold)
    embedded = await score_grouper(names, config, embedder)
    return Report(
        names=len(names), analytes=len({n.group for n in names}), scores=[offline, embedded]
    )


async def score_grouper(
    names: Sequence[LabelledName], config: StepConfig, embedder: Embedder | None
) -> GrouperScore:
    """Group ``names`` as one document and count pairs."""
    rows = [Biomarker(name=n.name, unit=n.unit, value=1.0, value_text="1") for n in names]
    ctx = make_context(step="grouper", config=config, embedder=embedder, log=_QUIET)
    output = await group(as_step_context(ctx), ParserOutput.of(Extraction(biomarkers=rows)))
    found = {member: g.canonical_name for g in output.groups for member in g.members}
    truth = {n.name: n.group for n in names}
    if len(truth) != len(names):
        raise ValueError("a name appears twice in the labelled set")
    true_pairs = found_pairs = correct = 0
    wrong: list[WrongMerge] = []
    for a, b in combinations([n.name for n in names], 2):
        same_true, same_found = truth[a] == truth[b], found[a] == found[b]
        true_pairs += same_true
        found_pairs += same_found
        correct += same_true and same_found
        if same_found and not same_true:
            wrong.append(WrongMerge(a=a, b=b, a_group=truth[a], b_group=truth[b]))
    return GrouperScore(
        grouper="embedding" if config.embedding_model else "offline",
        model=output.embedding_model or config.embedding_model,
        threshold=config.embedding_threshold if config.embedding_model else 0.0,
        groups_found=output.group_count,
        true_pairs=true_pairs,
        found_pairs=found_pairs,
        correct_pairs=correct,
        precision=correct / found_pairs if found_pairs else 1.0,
        recall=correct / true_pairs if true_pairs else 1.0,
        wrong_merges=wrong,
        warnings=list(output.warnings),
    )


class DirectEmbedder:
    """A real model through litellm for the evaluation: no Redis, no cache, no meter."""

    def __init__(self, model: str, api_key: str, api_base: str | None, timeout_s: float) -> None:
        self.model = model
        self._key, self._base, self._timeout = api_key, api_base, timeout_s

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        from saga.adapters.embedding_replies import response_vectors
        from saga.adapters.llm_models import load_litellm

        litellm = await load_litellm()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), 256):
            batch = list(texts[start : start + 256])
            try:
                response = await litellm.aembedding(
                    model=self.model,
                    input=batch,
                    api_key=self._key,
                    api_base=self._base,
                    timeout=self._timeout,
                    max_retries=0,
                )
            except Exception as exc:  # the report shows it; provider messages may echo keys
                raise RetryableError(f"embedding call failed: {type(exc).__name__}") from None
            vectors += response_vectors(response, len(batch))
        return Embeddings(vectors=vectors, model=self.model, paid=len(texts))


def render(report: Report, verbose: bool = False) -> str:
    """A table of both groupers; with ``verbose``, every wrong merge."""
    lines = [
        f"{report.names} names of {report.analytes} analytes (saga/evaluation/grouping_truth.py)",
        "",
        f"{'grouper':<10} {'model':<32} {'threshold':>9} {'groups':>6} "
        f"{'precision':>9} {'recall':>7} {'wrong pairs':>11}",
    ]
    for s in report.scores:
        threshold = f"{s.threshold:.2f}" if s.grouper == "embedding" else "-"
        lines.append(
            f"{s.grouper:<10} {s.model or '-':<32} {threshold:>9} {s.groups_found:>6} "
            f"{s.precision:>9.1%} {s.recall:>7.1%} {len(s.wrong_merges):>11}"
        )
    for s in report.scores:
        lines += [f"warning ({s.grouper}): {w}" for w in s.warnings]
        if verbose:
            lines += [
                f"wrong merge ({s.grouper}): {w.a!r} ({w.a_group}) + {w.b!r} ({w.b_group})"
                for w in s.wrong_merges
            ]
    if any(s.model == STAND_IN for s in report.scores):
        lines.append(
            "note: the embedding figures use stand-in vectors (hashed character trigrams), "
            "not a medical embedding model: they measure the grouping rules, not a model."
        )
    return "\n".join(lines)
