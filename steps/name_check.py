"""The name check: a value whose analyte name the table does not know is never trusted as read.

A lab prints its own analytes (``Zonulin``, a veterinary ``GLOB``), and OCR misreads
known ones (``Hemoglobin Alc`` for Hemoglobin A1c, ``Alburnin`` for Albumin). Either
way the table (``saga.steps.synonyms``) cannot say what the value measures, so no
check of ours vouches that its number belongs to the analyte a reader will take it
for. Such a value is kept, never dropped and never renamed, but marked
``unverified`` with a warning saying why, and the document is flagged for review.

On an OCR page (``saga.steps.ocr_gate``) the warning says more when the name is
within a few OCR-confusable characters of a known one (``l``/``1``/``I``, ``O``/``0``,
``S``/``5``, ``B``/``8``, ``rn``/``m``, plus at most one other character lost or
changed in a long name): that it may be a misread of that analyte, which a person
confirms; the name is still not corrected. The measure is general (a weighted edit
distance against every alias of the table), not a list of misreads.
"""

from __future__ import annotations

import functools

from msgspec.structs import replace

from saga.steps.models import Biomarker
from saga.steps.normalize import normalize_name
from saga.steps.synonyms import SYNONYMS, canonical_name

UNKNOWN_NAME_WARNING = "its name is not an analyte the table knows: kept unverified"
"""The warning of a value whose name the table does not know (text or OCR)."""
MISREAD_PREFIX = "its name, read by OCR, may be a misread of "
"""The start of the warning of an OCR'd name near a known one (the known name follows)."""

# single characters OCR confuses, after case folding (normalize_name lower-cases)
_GROUPS = ("il1|!", "o0", "s5", "b8", "z2", "g9q", "uv")
_SAME = {ch: group[0] for group in _GROUPS for ch in group}
# character pairs read as one glyph and back
_PAIRS = {("rn", "m"), ("cl", "d"), ("vv", "w"), ("ii", "u"), ("nn", "m")}
CONFUSABLE_COST = 0.25
"""An edit between characters OCR confuses; any other edit costs 1."""
LONG_NAME = 6
"""Names of at least this many letters may also differ by one plain edit; shorter ones
(``HDL``, ``LDL``, ``Na``, ``K``) only by confusable characters, or every short name
would be near another."""


def unknown(found: Biomarker) -> bool:
    """True when the table does not know the name as written (an extractor's own
    canonical name is a claim, not a match: a model that "fixed" a misread is not trusted)."""
    return canonical_name(found.name) is None


def mark_unknown(found: Biomarker) -> Biomarker:
    """``found`` unverified with the unknown-name warning when the table does not know its name."""
    if not unknown(found) or UNKNOWN_NAME_WARNING in found.warnings:
        return found
    where = found.provenance
    marked = replace(found, warnings=[*found.warnings, UNKNOWN_NAME_WARNING])
    if where is None:
        return marked
    return replace(marked, provenance=replace(where, unverified=True))


def has_unknown_name(found: Biomarker) -> bool:
    return UNKNOWN_NAME_WARNING in found.warnings


def misread_warning(known: str) -> str:
    return f"{MISREAD_PREFIX}{known} (not corrected; a person confirms)"


@functools.cache
def _aliases() -> tuple[tuple[str, str], ...]:
    """(comparable spelling without spaces, canonical name) of every alias."""
    seen: dict[str, str] = {}
    for canonical, aliases in SYNONYMS.items():
        for alias in (canonical, *aliases):
            squeezed = normalize_name(alias).replace(" ", "")
            if squeezed:
                seen.setdefault(squeezed, canonical)
    return tuple(seen.items())


@functools.lru_cache(maxsize=1024)
def near_known(name: str) -> str | None:
    """The canonical name of the known analyte ``name`` is an OCR misread of, if any.

    Near means: within OCR-confusable edits of one of its aliases (at least one edit),
    plus one plain edit when the name is long. The closest alias wins; a tie between
    two analytes is no answer (a person would not know which either)."""
    written = normalize_name(name).replace(" ", "")
    if len(written) < 2 or canonical_name(name) is not None:
        return None
    plain = 1.0 if len(written) >= LONG_NAME else 0.0
    best: dict[str, float] = {}
    for alias, canonical in _aliases():
        if abs(len(alias) - len(written)) > 2:
            continue
        cost = distance(written, alias, plain + 1.0)
        if 0 < cost <= plain + 0.75 and cost < best.get(canonical, 99.0):
            best[canonical] = cost
    if not best:
        return None
    ranked = sorted(best.items(), key=lambda item: item[1])
    if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
        return None
    return ranked[0][0]


def distance(a: str, b: str, limit: float = 99.0) -> float:
    """Edit distance with confusable edits cheap; anything over ``limit`` is ``limit + 1``."""
    inf = limit + 1.0
    prev = [float(j) for j in range(len(b) + 1)]
    rows = [prev]
    for i in range(1, len(a) + 1):
        row = [float(i)] + [inf] * len(b)
        for j in range(1, len(b) + 1):
            same = a[i - 1] == b[j - 1]
            sub = 0.0 if same else _sub_cost(a[i - 1], b[j - 1])
            row[j] = min(prev[j] + 1.0, row[j - 1] + 1.0, prev[j - 1] + sub)
            for x, y in _PAIRS:
                for left, right, di, dj in ((x, y, len(x), len(y)), (y, x, len(y), len(x))):
                    if i >= di and j >= dj and a[i - di : i] == left and b[j - dj : j] == right:
                        row[j] = min(row[j], rows[i - di][j - dj] + CONFUSABLE_COST)
        if min(row) > limit:
            return inf
        rows.append(row)
        prev = row
    return min(prev[-1], inf)


def _sub_cost(x: str, y: str) -> float:
    gx, gy = _SAME.get(x), _SAME.get(y)
    return CONFUSABLE_COST if gx is not None and gx == gy else 1.0
