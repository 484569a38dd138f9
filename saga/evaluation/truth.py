"""Ground truth of one corpus document: what a careful person reads on the page.

A corpus directory holds ``<name>.pdf`` and ``<name>.truth.json`` side by side;
the JSON is one ``ExpectedDocument``. The truth is written by hand (or by the
code that draws the PDF, from the same data), never taken from an extractor.
The format is documented in ``tests/corpus/README.md``.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

SCHEMA_VERSION = 1
TRUTH_SUFFIX = ".truth.json"


class ExpectedResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One result as printed.

    ``value`` is the number the result states (``13,2`` -> 13.2, ``<0.3`` -> 0.3
    with ``comparator`` ``"<"``); None for a qualitative result (``Negative``).
    ``flag_text`` is the flag as printed (``"▼ (L)"``, ``"+"``, ``"H"``);
    ``flag`` what it means: ``high``, ``low``, ``normal`` or ``""`` (no range, or
    an abnormal word result that is neither high nor low).
    """

    name: str
    analyte: str
    value_text: str
    value: float | None
    page: int
    comparator: str = ""
    unit: str = ""
    reference: str = ""
    flag_text: str = ""
    flag: str = ""


class ExpectedDocument(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A corpus document and everything it states.

    ``image_pages`` are 1-based pages drawn as images (no text layer): results
    on them are in ``results`` (a person reads them) but no text extractor can.
    ``expect_review`` says a correct parser must ask for a person's review.
    """

    layout: str
    document: str
    description: str
    results: list[ExpectedResult]
    page_count: int
    expect_review: bool = False
    image_pages: list[int] = []
    diagnoses: list[str] = []
    scan: str = ""
    """"" for a text document; else how it was scanned (``scan-300``, ``scan-200``,
    ``fax-200x200``, ``fax-200x100``, ``stamp``, ``rotated``, ``mixed``, ``refuse``):
    ``saga eval`` scores these apart, as OCR reads them."""
    schema: int = SCHEMA_VERSION


class TruthError(Exception):
    """A truth file that cannot be used: one sentence saying which and why."""


def load_truth(path: Path) -> ExpectedDocument:
    """Decode one truth file and check that its PDF is beside it."""
    try:
        truth = msgspec.json.decode(path.read_bytes(), type=ExpectedDocument)
    except (OSError, msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise TruthError(f"{path.name} is not a readable truth file ({exc})") from None
    if truth.schema != SCHEMA_VERSION:
        raise TruthError(f"{path.name} has schema {truth.schema}; this saga reads {SCHEMA_VERSION}")
    if not (path.parent / truth.document).is_file():
        raise TruthError(f"{path.name} names {truth.document!r}, which is not in {path.parent}")
    return truth


def find_truths(directory: Path) -> list[Path]:
    """The truth files of a corpus directory, sorted by name."""
    return sorted(p for p in directory.iterdir() if p.name.endswith(TRUTH_SUFFIX))


def dump_truth(truth: ExpectedDocument) -> bytes:
    """The truth as indented JSON (what the corpus builder writes)."""
    return msgspec.json.format(msgspec.json.encode(truth), indent=2) + b"\n"
