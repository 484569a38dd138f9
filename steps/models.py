"""Typed inputs and outputs of the router, parser and grouper (msgspec Structs).

Each step's output is the next step's input: ``RouterInput -> RouterOutput ->
ParserOutput -> GrouperOutput``. All Structs are frozen and keyword-only so a
checkpoint decodes to exactly what was committed. The per-result Structs omit
default fields when encoded (the parser's output is a size-bounded checkpoint);
decoding fills them back in.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import msgspec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
"""A non-empty name; the bound is enforced when a model's JSON is decoded."""


class Flag(StrEnum):
    """A result compared with its reference range; ``""`` when it cannot be told."""

    HIGH = "high"
    LOW = "low"
    NORMAL = "normal"
    UNKNOWN = ""


class RouterInput(msgspec.Struct, frozen=True, kw_only=True):
    """The first step's input.

    ``document`` is a path, ``file://`` or ``http(s)://`` reference; ``""`` means
    "resolve it from the record id through ``StepConfig.document_source``".
    """

    document: str = ""


class RouterOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What the router found; the page texts travel separately (the pages blob)."""

    document_name: str
    media_type: str
    page_count: int
    textless_pages: list[int] = []
    """1-based pages that gave no text (a blank scan, a photo, or a scan with OCR
    off): the parser cannot read them and says so in its review reason."""
    ocr_pages: list[OcrPage] = []
    """Pages whose text OCR read, with the confidence of each character."""
    document: str = ""
    """The reference the document was fetched by, kept only when the parser will send
    the OCR'd pages to a vision model (``StepConfig.llm_vision``) and must fetch it again."""


class OcrPage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One page read by OCR: how well, and the confidence of every character."""

    page: int
    confidence: str
    """The page text's shape: per character the decile (``0``-``9``) of the confidence
    of the word it was read in, a space for a space (``steps/ocr_layout.py``)."""
    mean_confidence: int = 0
    words: int = 0
    rotated: int = 0
    """Degrees the page was turned to be read (a page fed sideways)."""
    cpu_s: float = 0.0


class Provenance(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where in the document a value was read: the evidence a reviewer checks.

    ``page`` is 1-based; ``line`` the source line's text as extracted (trimmed);
    ``start``/``end`` the character span of the value inside ``line``, so that
    ``line[start:end]`` is the value as written (``"13,2"``, ``"<0.3"``).
    """

    page: int
    line: str
    start: int = 0
    end: int = 0
    ocr_confidence: int | None = None
    """Set when the line was read by OCR: the lowest confidence (0-100, in steps of
    10) of the characters of the value (``steps/ocr_gate.py``)."""
    vouched_by: list[str] = []
    """The checks that confirm the value (``analyte``: possible for the known analyte
    in its unit; ``range``: of the order of its reference range as printed)."""
    unverified: bool = False
    """No check could vouch for the value: the parser asks for review."""


class PreviousValue(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An earlier result printed beside the current one, with its column's date if any."""

    value_text: str
    date: str = ""


class Reviewed(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A person's decision on a value: ``accepted``, ``corrected`` or ``added``."""

    decision: str
    by: str
    at_ms: int = 0
    machine: Biomarker | None = None
    """corrected: the value as the machine read it."""


class Biomarker(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One lab result as the document states it.

    ``value_text`` is the result as written (``"6.1"``, ``"<0.5"``, ``"Negative"``);
    ``value`` is the number it states (for ``"<0.5"``, 0.5 with ``comparator`` ``"<"``),
    None for a qualitative result. ``reference_text`` is the range as written;
    ``reference_low``/``reference_high`` its numeric bounds (one may be None for
    ``< 5.7`` or ``> 40``). ``canonical_name`` and ``loinc`` come from the synonym
    table when it knows the analyte. ``provenance`` is where it was read;
    ``warnings`` what a check found doubtful without rejecting it.
    """

    name: Name
    value: float | None = None
    value_text: str = ""
    comparator: str = ""
    """``"<"``, ``"<="``, ``">"`` or ``">="`` for a censored result, else ``""``."""
    unit: str = ""
    reference_low: float | None = None
    reference_high: float | None = None
    reference_text: str = ""
    flag: Flag = Flag.UNKNOWN
    reviewed: Reviewed | None = None
    """Set when a person decided this value (``steps/review.py``); a correction keeps
    the machine's original in ``reviewed.machine``."""
    canonical_name: str = ""
    loinc: str = ""
    provenance: Provenance | None = None
    warnings: list[str] = []
    note: str = ""
    """Lines printed under the result that are no results: reference categories
    (``Desirable: <200``), interpretation comments; joined with ``" | "``."""
    previous: list[PreviousValue] = []
    """Earlier results of a cumulative report, never the value."""


class Rejected(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A candidate result that failed a check: kept, with the reason, never silently dropped."""

    name: str
    value_text: str = ""
    unit: str = ""
    reason: str
    provenance: Provenance | None = None


class Coverage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How much of the document the extraction explains.

    ``candidate_lines`` counts lines that look like results (a number with a unit
    or a reference range); ``explained_lines`` those an accepted or rejected result
    accounts for. ``unexplained`` samples the rest (bounded), with their pages.
    """

    candidate_lines: int = 0
    explained_lines: int = 0
    unexplained: list[Provenance] = []

    @property
    def ratio(self) -> float:
        """1.0 when there was nothing to explain."""
        if self.candidate_lines == 0:
            return 1.0
        return self.explained_lines / self.candidate_lines


class Diagnosis(msgspec.Struct, frozen=True, kw_only=True):
    """A diagnosis, with its ICD-10 code when the document gives one."""

    name: Name
    code: str = ""


class Procedure(msgspec.Struct, frozen=True, kw_only=True):
    """A procedure, with its date as written when the document gives one."""

    name: Name
    date: str = ""


class GeneticFinding(msgspec.Struct, frozen=True, kw_only=True):
    """A gene, the variant found and the lab's interpretation."""

    gene: Name
    variant: Name
    interpretation: str = ""


class Extraction(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the parser found in one document."""

    biomarkers: list[Biomarker] = []
    diagnoses: list[Diagnosis] = []
    procedures: list[Procedure] = []
    genetics: list[GeneticFinding] = []
    rejected: list[Rejected] = []
    coverage: Coverage = Coverage()


class ParserOutput(msgspec.Struct, frozen=True, kw_only=True):
    """Counts for the timeline plus the full extraction (a size-bounded checkpoint)."""

    biomarker_count: int
    diagnosis_count: int
    procedure_count: int
    genetic_count: int
    extraction: Extraction
    review: str = ""
    """Why a person should look at this result before trusting it (``""``: no reason).
    The runtime records it on the saga: it ends "completed, needs review"."""

    @classmethod
    def of(cls, extraction: Extraction, review: str = "") -> ParserOutput:
        """Build the output with counts taken from ``extraction``."""
        return cls(
            biomarker_count=len(extraction.biomarkers),
            diagnosis_count=len(extraction.diagnoses),
            procedure_count=len(extraction.procedures),
            genetic_count=len(extraction.genetics),
            extraction=extraction,
            review=review,
        )


class JoinedBy(StrEnum):
    """How a name came into its group."""

    FIRST = "first"
    """It opened the group: the first name of an analyte the synonym table does not know."""
    SYNONYM = "synonym"
    """The synonym table lists it (after normalisation)."""
    FUZZY = "fuzzy"
    """A near spelling (rapidfuzz) of a table alias or of a name already in the group."""
    EMBEDDING = "embedding"
    """Embedding similarity with the group's names, units and distinguishing words agreeing."""
    LLM = "llm"
    """The LLM named it (``SAGA_LLM_GROUP_NAMES``)."""


class MemberSource(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why one member name is in its group: the evidence a reviewer checks.

    ``score`` is rapidfuzz's ratio over 100 for ``fuzzy``, the cosine similarity for
    ``embedding``, 0 otherwise; ``matched`` the alias or name it was matched against."""

    name: str
    joined_by: JoinedBy
    score: float = 0.0
    matched: str = ""


class BiomarkerGroup(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Equivalent biomarkers under one canonical name.

    ``members`` lists the distinct names as the document wrote them, in order of
    first appearance; ``biomarkers`` every result of the group, in document order;
    ``sources`` how each member joined (same order as ``members``).
    """

    canonical_name: str
    members: list[str]
    biomarkers: list[Biomarker]
    sources: list[MemberSource] = []


class GrouperOutput(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The biomarker groups of one document, in order of first appearance.

    ``embedding_model`` is the model whose similarities grouped the names (``""``: the
    synonym table and fuzzy matching alone); ``warnings`` says why embeddings were
    configured but not used (an open circuit, a failed call)."""

    group_count: int
    groups: list[BiomarkerGroup]
    embedding_model: str = ""
    warnings: list[str] = []
