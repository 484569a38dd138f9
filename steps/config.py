"""Settings the business steps read (limits, extractor choice), as one frozen struct."""

from __future__ import annotations

from enum import StrEnum

import msgspec


class ExtractorKind(StrEnum):
    RULES = "rules"
    LLM = "llm"


class StepConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Limits and choices for router, parser and grouper."""

    max_document_bytes: int = 20 * 1024 * 1024
    """A document larger than this is a permanent PayloadTooLargeError."""
    max_pages: int = 200
    max_chars_per_page: int = 20_000
    max_page_content_bytes: int = 2 * 1024 * 1024
    """Decompressed bytes of one PDF page's content streams and forms, measured before
    any text is extracted (a decompression bomb is refused here)."""
    max_content_bytes: int = 32 * 1024 * 1024
    """The same, summed over every page: pages sharing one large stream count it each."""
    max_extract_memory_bytes: int = 512 * 1024 * 1024
    """Address space of a PDF extraction process (its ``RLIMIT_AS``)."""
    extract_processes: int = 2
    """PDF extraction processes one worker runs at once."""
    ocr: bool = False
    """``SAGA_OCR``: read scanned pages and TIFF/PNG/JPEG documents with Tesseract (in the
    extraction process); off (the default until the scanned corpus passes its gates)
    refuses a document without a text layer as before."""
    ocr_languages: str = "eng+deu+fra"
    """``SAGA_OCR_LANGUAGES``: Tesseract language data joined by ``+`` (each one read
    costs time on every page: name only those a deployment receives)."""
    ocr_concurrency: int = 2
    """``SAGA_OCR_CONCURRENCY``: pages of one document read at once (one core each)."""
    ocr_min_confidence: int = 80
    """``SAGA_OCR_MIN_CONFIDENCE``: a value read from characters under this confidence
    (0-100) is rejected and the document flagged (docs/extraction.md)."""
    extractor: ExtractorKind = ExtractorKind.RULES
    """``rules`` needs no network; ``llm`` calls the user's model through litellm."""
    llm_vision: bool = False
    """``SAGA_LLM_VISION``: the model (``SAGA_LLM_MODEL``) reads pictures: the parser sends
    the pages OCR read as images instead of their OCR text, and accepts a value only if
    it is found in that OCR text (``steps/vision.py``). Off by default."""
    llm_group_names: bool = False
    """Ask the LLM to canonicalise group names (grouper); off means offline only."""
    embedding_model: str = ""
    """``SAGA_GROUPER_EMBEDDING_MODEL``: the litellm embedding model the grouper uses to
    join names the synonym table does not know; "" groups offline only."""
    embedding_threshold: float = 0.9
    """``SAGA_GROUPER_EMBEDDING_THRESHOLD``: the cosine similarity (0..1) two names need
    to be grouped by embeddings. Model-dependent: calibrate with ``saga eval --grouping``."""
    min_coverage: float = 0.9
    """``SAGA_PARSER_MIN_COVERAGE``: below this share of result-like lines explained by
    a result, the parser marks the saga for review. 0.9 because the corpus gate asks
    that every document read with recall under 90% be flagged, and coverage tracks
    recall on result rows (docs/extraction.md)."""
    max_output_bytes: int = 512 * 1024
    """A step output (checkpoint) larger than this is a permanent error."""
    document_source: str = ""
    """Where the router finds a record's document when the saga names none
    (``SAGA_DOCUMENT_SOURCE``): a path or URL template with ``{record_id}``, e.g.
    ``https://records.internal/api/records/{record_id}/document`` or
    ``/data/{record_id}.pdf``. Empty means every saga must name its document."""
