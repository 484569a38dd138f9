"""Checks a lab result passes before the parser accepts it, whichever extractor read it.

Each check is a plain function of one Biomarker that returns the reason it fails
(one short clause) or None. ``first_failure`` runs them in order; the parser
turns a failure into a ``Rejected`` entry with that reason, so nothing is
dropped silently. The checks, in order:

1. ``value_matches_text``: the number agrees with the value as written
   (``"13,2"`` is 13.2; a value the text does not state is a misread).
2. ``not_a_reference_bound``: the value was not read from inside the reference
   range (``12.0 - 15.5`` must never give 15.5 as the result).
3. ``flag_agrees``: a written high/low/normal flag agrees with the value and the
   range. A disagreement means one of the three was misread: rejected. At the
   range's edge (value equal to a bound) labs differ on inclusive bounds, so the
   result is kept with a warning instead.
4. ``unit_plausible``: the unit is one the analyte is reported in, when the
   analyte's units are known (``saga.steps.analytes``).
5. ``value_possible``: the value lies within what is physically possible for the
   analyte in that unit (``Leukozyten 7500 /nl`` is not).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from saga.steps.analytes import limits_for, unit_key
from saga.steps.lab_values import NUM, Range, compute_flag, parse_range
from saga.steps.models import Biomarker, Flag

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_RANGE_END = re.compile(rf"(?:{NUM})\s*(?:-|\u2013|\u2014|to|bis)\s*$", re.IGNORECASE)
_RANGE_START = re.compile(rf"^\s*(?:-|\u2013|\u2014|to|bis)\s*(?:{NUM})", re.IGNORECASE)
EDGE_WARNING = "the flag disagrees with the range at its edge (inclusive or exclusive bound?)"
NO_UNIT_WARNING = "no unit is written next to the value"


def value_matches_text(found: Biomarker) -> str | None:
    """The number is one the written value states, read with a point or a comma."""
    if found.value is None or not found.value_text:
        return None
    for digits in _NUMBER.findall(found.value_text):
        if any(_close(found.value, reading) for reading in _readings(digits)):
            return None
    return f"the value {found.value:g} is not what the text {found.value_text!r} states"


def _readings(digits: str) -> set[float]:
    """Every number ``digits`` can state: ``7,500`` is 7500 or 7.5, ``1.250`` 1.25 or 1250."""
    readings = set()
    if re.fullmatch(r"\d+(?:,\d{3})*(?:\.\d+)?", digits):
        readings.add(float(digits.replace(",", "")))
    if re.fullmatch(r"\d+(?:\.\d{3})*(?:,\d+)?", digits):
        readings.add(float(digits.replace(".", "").replace(",", ".")))
    return readings


def _close(a: float, b: float) -> bool:
    return abs(abs(a) - b) <= 1e-9 * max(1.0, b)


def not_a_reference_bound(found: Biomarker) -> str | None:
    """The value's span in its line is not one end of an ``a - b`` range."""
    where = found.provenance
    if where is None or where.end <= where.start:
        return None
    before, after = where.line[: where.start], where.line[where.end :]
    if _RANGE_END.search(before) or _RANGE_START.match(after):
        return "the value was read from the reference range, not the result"
    text = found.reference_text
    if text and len(text) > where.end - where.start:
        for match in re.finditer(re.escape(text), where.line):
            if match.start() <= where.start and where.end <= match.end():
                return "the value was read from the reference range, not the result"
    return None


def reference_range(found: Biomarker) -> Range | None:
    """The result's range, with strict bounds when its text says ``<`` or ``>``."""
    if found.reference_low is None and found.reference_high is None:
        return None
    parsed = parse_range(found.reference_text) if found.reference_text else None
    if parsed is not None and (parsed.low, parsed.high) == (
        found.reference_low,
        found.reference_high,
    ):
        return parsed
    return Range(found.reference_text, found.reference_low, found.reference_high)


def flag_disagrees(found: Biomarker) -> bool:
    """A written flag that the value and the range contradict."""
    if found.flag is Flag.UNKNOWN or found.value is None:
        return False
    computed = compute_flag(found.value, reference_range(found), found.comparator)
    return computed is not Flag.UNKNOWN and computed is not found.flag


def at_range_edge(found: Biomarker) -> bool:
    """The value equals one of the range's bounds."""
    return found.value is not None and found.value in (found.reference_low, found.reference_high)


def flag_agrees(found: Biomarker) -> str | None:
    """A flag that disagrees with value and range, away from the range's edge, is a misread."""
    if not flag_disagrees(found) or at_range_edge(found):
        return None
    return (
        f"the flag {found.flag.value!r} disagrees with the value {found.value_text or found.value}"
        f" and the range {found.reference_text!r}"
    )


def unit_plausible(found: Biomarker) -> str | None:
    """A unit the analyte is reported in (only checked for analytes the table knows)."""
    limits = limits_for(found.canonical_name)
    if limits is None or not found.unit or unit_key(found.unit) in limits:
        return None
    return f"the unit {found.unit!r} is not a unit {found.canonical_name} is reported in"


def value_possible(found: Biomarker) -> str | None:
    """A value within what is physically possible for the analyte in its unit."""
    limits = limits_for(found.canonical_name)
    bounds = limits.get(unit_key(found.unit)) if limits and found.unit else None
    if bounds is None or found.value is None or bounds[0] <= found.value <= bounds[1]:
        return None
    return (
        f"{found.value:g} {found.unit} is impossible for {found.canonical_name}"
        f" (possible: {bounds[0]:g} to {bounds[1]:g})"
    )


CHECKS: tuple[Callable[[Biomarker], str | None], ...] = (
    value_matches_text,
    not_a_reference_bound,
    flag_agrees,
    unit_plausible,
    value_possible,
)


def first_failure(found: Biomarker) -> str | None:
    """The reason of the first check ``found`` fails, or None when it passes them all."""
    for check in CHECKS:
        if (reason := check(found)) is not None:
            return reason
    return None


def warnings_for(found: Biomarker) -> list[str]:
    """Doubts that do not reject the result."""
    doubts = [EDGE_WARNING] if flag_disagrees(found) and at_range_edge(found) else []
    if found.value is not None and not found.unit and limits_for(found.canonical_name):
        doubts.append(NO_UNIT_WARNING)
    return doubts
