"""The confidence gate: what a value read by OCR must show before it is accepted.

Runs in the parser after vetting, on the output of either extractor. A result
whose provenance cites a page the router read by OCR gets the confidence of the
characters of its value (``Provenance.ocr_confidence``, from the page's
confidence map) and is rejected, with the reason, when

* those characters were read under ``UNSURE_FLOOR`` (60); read from there up to
  ``StepConfig.ocr_min_confidence`` the value is kept, ``unverified``, and its page
  named for review;
* a second reading of the value's box (``ocr_reread``) read other digits;
* a letter OCR confuses with a digit (``O o D Q I l | S s B Z g``) touches a
  numeric value: ``1O.5`` or ``l4`` is never read as 10.5 or 14, nor corrected into
  it (a word value, ``NON-REACTIVE``, is letters by nature and is not held to this);
* the value is written with the decimal separator the document does not use
  (``4,6`` in a document of points): a lost or added speck is the commonest
  OCR misread of a number, and ``4,6`` could be 4.6 or 46.

A value whose name the table does not know is already ``unverified``
(``name_check``); on an OCR page its warning also names the known analyte it is a
few OCR-confusable characters from (``Hemoglobin Alc``: Hemoglobin A1c?), and the
review names the page; the name is never corrected.

Each rejection asks for review, naming the pages (``reasons``). So does a row OCR
lost whole: a line of an OCR page with a cell that is a known unit, from which no
value (kept or rejected) was read, had its value misread past recognition (``ELSE``
for 11.1); coverage counts only lines with a number, so it would not see it.
Nothing here changes a character of the text or of a value.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from saga.steps.analytes import KNOWN_UNITS, unit_key
from saga.steps.models import Biomarker, Extraction, OcrPage, Provenance, Rejected
from saga.steps.name_check import has_unknown_name, misread_warning, near_known
from saga.steps.ocr_layout import span_confidence, span_disputed
from saga.steps.page_layout import uses_decimal_comma

CONFUSABLE = frozenset("OoDQIl|SsBZg")
UNSURE_FLOOR = 60
"""A value read at confidence from this up to the threshold is kept but ``unverified``,
and its page named for review; under it, it is rejected. On the scanned corpus the
values between 60 and 80 were all right (scan recall 87.8% -> 90.8%, no new wrong
value, seen or unseen), yet 60 is where Tesseract starts to guess, so a person looks."""
LOW_PAGE_CONFIDENCE = 70
"""A page read at a mean word confidence under this is named in the review reason."""


def gate(
    extraction: Extraction, pages: Sequence[str], ocr: Sequence[OcrPage], threshold: int
) -> tuple[Extraction, list[str]]:
    """The extraction with OCR values checked, and the review reasons it gives."""
    if not ocr:
        return extraction, []
    maps = {page.page: page.confidence.split("\n") for page in ocr}
    lines = {page.page: pages[page.page - 1].split("\n") for page in ocr if page.page <= len(pages)}
    comma = uses_decimal_comma(pages)
    kept: list[Biomarker] = []
    rejected: list[Rejected] = []
    low_pages: set[int] = set()
    unsure: list[int] = []
    floor = min(threshold, UNSURE_FLOOR)
    for found in extraction.biomarkers:
        prov = found.provenance
        if prov is None or prov.page not in maps:
            kept.append(found)
            continue
        confidence, disputed = _confidence(prov, lines[prov.page], maps[prov.page])
        prov = replace(prov, ocr_confidence=confidence)
        reason = why_not(found, prov, confidence, floor, comma=comma, disputed=disputed)
        if not reason and confidence is not None and confidence < threshold:
            unsure.append(prov.page)
            kept.append(replace(found, provenance=replace(prov, unverified=True)))
        elif reason:
            low_pages.add(prov.page)
            rejected.append(
                Rejected(
                    name=found.name,
                    value_text=found.value_text,
                    unit=found.unit,
                    reason=reason,
                    provenance=prov,
                )
            )
        else:
            kept.append(replace(found, provenance=prov))
    kept, misread = _misread_names(kept, set(maps))
    marked = [_marked(r, lines, maps) for r in extraction.rejected]
    out = replace(extraction, biomarkers=kept, rejected=marked + rejected)
    reasons = _reasons(rejected, low_pages, ocr) + _unsure(unsure, threshold) + misread
    return out, reasons + _lost_rows(out, lines)


def why_not(
    found: Biomarker,
    prov: Provenance,
    confidence: int | None,
    threshold: int,
    *,
    comma: bool,
    disputed: bool = False,
) -> str:
    """Why an OCR value cannot be accepted; "" when it can."""
    if disputed:
        return "read by OCR twice, and the two readings of the value differ"
    if confidence is None:
        return "read by OCR, but its characters are not where it cites them"
    if confidence < threshold:
        return f"read by OCR at confidence {confidence} (under {threshold})"
    line, start, end = prov.line, prov.start, prov.end
    near = line[max(start - 1, 0) : end + 1]
    # a word value (NON-REACTIVE, positiv) is made of letters: only a number is at risk
    numeric = any(ch.isdigit() for ch in found.value_text)
    if numeric and any(ch in CONFUSABLE for ch in near):
        return "read by OCR with a letter that looks like a digit touching the value"
    written = found.value_text
    wrong_separator = "," in written if not comma else "." in written
    if wrong_separator and any(ch.isdigit() for ch in written):
        return "read by OCR with a decimal separator the document does not use"
    return ""


def _confidence(
    prov: Provenance, lines: Sequence[str], maps: Sequence[str]
) -> tuple[int | None, bool]:
    """The confidence of the value's characters, and whether a second reading disputes them."""
    for index, text in enumerate(lines):
        if text.strip() == prov.line and index < len(maps):
            offset = len(text) - len(text.lstrip())
            start, end = prov.start + offset, prov.end + offset
            conf = maps[index]
            return span_confidence(conf, start, end), span_disputed(conf, start, end)
    return None, False


def _misread_names(
    found: list[Biomarker], ocr_pages: set[int]
) -> tuple[list[Biomarker], list[str]]:
    """Values on OCR pages whose unknown name is a few confusable characters from a known
    analyte's: the warning names the analyte it may be, the review names the pages.
    The name itself is left as read (``name_check``)."""
    out: list[Biomarker] = []
    pages: list[int] = []
    for item in found:
        prov = item.provenance
        near = None
        if prov is not None and prov.page in ocr_pages and has_unknown_name(item):
            near = near_known(item.name)
        if near is None or prov is None:
            out.append(item)
            continue
        pages.append(prov.page)
        out.append(replace(item, warnings=[*item.warnings, misread_warning(near)]))
    if not pages:
        return out, []
    count = len(pages)
    return out, [
        f"{count} name{'s' if count > 1 else ''} on {_pages(sorted(set(pages)))} read by OCR"
        " close to a known analyte's (a misread?), not corrected"
    ]


def _marked(item: Rejected, lines: dict[int, list[str]], maps: dict[int, list[str]]) -> Rejected:
    prov = item.provenance
    if prov is None or prov.page not in maps:
        return item
    confidence, _ = _confidence(prov, lines[prov.page], maps[prov.page])
    return replace(item, provenance=replace(prov, ocr_confidence=confidence))


def _reasons(rejected: Sequence[Rejected], pages: set[int], ocr: Sequence[OcrPage]) -> list[str]:
    reasons = []
    if rejected:
        where = _pages(sorted(pages))
        count = len(rejected)
        reasons.append(
            f"{count} value{'s' if count > 1 else ''} on {where} not trusted as read by OCR"
        )
    weak = [p.page for p in ocr if p.mean_confidence < LOW_PAGE_CONFIDENCE]
    if weak:
        reasons.append(f"{_pages(weak)} read by OCR at low confidence")
    return reasons


def _unsure(pages: Sequence[int], threshold: int) -> list[str]:
    if not pages:
        return []
    count = len(pages)
    return [
        f"{count} value{'s' if count > 1 else ''} on {_pages(sorted(set(pages)))} read by OCR"
        f" at confidence under {threshold}, kept unverified"
    ]


def _lost_rows(extraction: Extraction, lines: dict[int, list[str]]) -> list[str]:
    """A review reason for OCR lines with a unit cell but no value read from them."""
    provenances = [b.provenance for b in extraction.biomarkers]
    provenances += [r.provenance for r in extraction.rejected]
    cited = {(p.page, p.line) for p in provenances if p is not None}
    lost: dict[int, int] = {}
    for page, texts in lines.items():
        for text in texts:
            cells = [c.strip() for c in text.split("  ") if c.strip()]
            has_unit = any(unit_key(c) in KNOWN_UNITS for c in cells[1:])
            if has_unit and (page, text.strip()) not in cited:
                lost[page] = lost.get(page, 0) + 1
    if not lost:
        return []
    count = sum(lost.values())
    return [
        f"{count} line{'s' if count > 1 else ''} on {_pages(sorted(lost))} with a unit"
        " but no value OCR could read"
    ]


def _pages(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:10])
    more = ", ..." if len(numbers) > 10 else ""
    return f"page{'s' if len(numbers) > 1 else ''} {shown}{more}"
