"""Checks a lab result passes before the parser accepts it, whichever extractor read it.

Each check is a plain function of one Biomarker and the document's number
format (``saga.steps.numbers``) that returns the reason it fails (one short
clause) or None. ``first_failure`` runs them in order; the parser turns a failure
into a ``Rejected`` entry with that reason, so nothing is dropped silently. None
of them needs the analyte's name to be known, except the two per-analyte ones:

1. ``not_a_category``: ``High``, ``Deficiency``, ``Optimal``, ``Note`` name a
   reference category or a comment, never an analyte; ``name_holds_no_values``:
   a name with results in it (``Haemoglobin 109L 121``) is a misread row.
2. ``value_matches_text``: the number is the one the written value states under
   the document's format; a numeral the format leaves ambiguous is refused.
3. ``range_matches_text``: the range's bounds are read from its text the same way.
4. ``not_a_reference_bound``: the value was not read from inside the reference
   range (``12.0 - 15.5`` must never give 15.5 as the result);
   ``nothing_between_name_and_value``: no other number stands between the name
   and the value on the line (``Quuxase  104  97``: which is the result?);
   ``value_line_names_it``: on a line that does not print the result's name, the
   label before the value names the same analyte (``Potassium 4.1`` is no Sodium);
   ``unit_is_printed``: a line that prints a unit prints the result's.
5. ``flag_agrees``: a written high/low/normal flag agrees with the value and the
   range. A disagreement means one of the three was misread: rejected. At the
   range's edge (value equal to a bound) labs differ on inclusive bounds, so the
   result is kept with a warning instead.
6. ``unit_plausible`` / 7. ``value_possible``: for analytes the table knows, a
   unit it is reported in and a possible value in it (converted between count
   units: ``/mm3``, ``x10^3/uL``, ``10^9/L``).
8. ``magnitude_plausible``: for any analyte, a value its unit can hold (a count
   per uL is whole; nothing is 5000 %).

What no check vouches for is marked unverified (``saga.steps.verify``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from saga.steps.analytes import (
    KNOWN_UNITS,
    NEGATIVE_UNITS,
    WHOLE_COUNTS,
    bounds_in,
    limits_for,
    unit_key,
    unit_magnitude,
)
from saga.steps.categories import is_category
from saga.steps.lab_values import NUM, Range, compute_flag, flag_of, parse_range
from saga.steps.models import Biomarker, Flag
from saga.steps.numbers import NumberFormat, read, read_value_text
from saga.steps.synonyms import canonical_name

ANY = NumberFormat()

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_RANGE_END = re.compile(rf"(?:{NUM})\s*(?:-|\u2013|\u2014|to|bis|a|\u00e0|tot)\s*$", re.IGNORECASE)
_RANGE_START = re.compile(
    rf"^\s*(?:-|\u2013|\u2014|to|bis|a|\u00e0|tot)\s*(?:{NUM})", re.IGNORECASE
)
EDGE_WARNING = "the flag disagrees with the range at its edge (inclusive or exclusive bound?)"
NO_UNIT_WARNING = "no unit is written next to the value"


def value_matches_text(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """The number is the one the written value states, read with the document's format.

    ``245.000`` is 245000 in a document that writes decimals with commas and 245 in
    one that writes them with points; where the document does not tell, it is
    refused rather than guessed (``saga.steps.numbers``).
    """
    if found.value is None or not found.value_text:
        return None
    stated, why = read_value_text(found.value_text, fmt, whole=_counts(found))
    if why:
        return f"the value cannot be read: {why}"
    if stated is None or _close(found.value, stated):
        return None
    return f"the value {found.value:g} is not what the text {found.value_text!r} states"


def _counts(found: Biomarker) -> bool:
    """A unit that counts cells: its numbers are whole (``7,500 /uL`` is 7500)."""
    return bool(found.unit) and unit_key(found.unit) in WHOLE_COUNTS


def range_matches_text(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """The range's bounds are numbers its text states, read with the same format as the value."""
    if not found.reference_text or (found.reference_low is None and found.reference_high is None):
        return None
    stated = []
    for numeral in _NUMBER.findall(found.reference_text):
        number, why = read(numeral, fmt, whole=_counts(found))
        if why:
            return f"the range {found.reference_text!r} cannot be read: {why}"
        stated.append(number)
    for bound in (found.reference_low, found.reference_high):
        if bound is not None and not any(_close(bound, n) for n in stated if n is not None):
            return f"the bound {bound:g} is not what the range {found.reference_text!r} states"
    return None


def _close(a: float, b: float) -> bool:
    return abs(abs(a) - b) <= 1e-9 * max(1.0, b)


def not_a_reference_bound(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
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


def flag_agrees(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """A flag that disagrees with value and range, away from the range's edge, is a misread."""
    if not flag_disagrees(found) or at_range_edge(found):
        return None
    return (
        f"the flag {found.flag.value!r} disagrees with the value {found.value_text or found.value}"
        f" and the range {found.reference_text!r}"
    )


def unit_plausible(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """A unit the analyte is reported in (only checked for analytes the table knows)."""
    limits = limits_for(found.canonical_name)
    if limits is None or not found.unit or bounds_in(found.canonical_name, found.unit):
        return None
    return f"the unit {found.unit!r} is not a unit {found.canonical_name} is reported in"


def value_possible(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """A value within what is possible for the analyte in its unit (converted: platelets
    150-400 x10^3/uL are 150,000-400,000 /mm3)."""
    bounds = bounds_in(found.canonical_name, found.unit) if found.unit else None
    if bounds is None or found.value is None or bounds[0] <= found.value <= bounds[1]:
        return None
    return (
        f"{found.value:g} {found.unit} is impossible for {found.canonical_name}"
        f" (possible: {bounds[0]:g} to {bounds[1]:g})"
    )


def magnitude_plausible(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """Whatever the analyte, a value its unit can hold: a count per uL is whole, a
    percentage is not 5000, a concentration in mmol/L not 10,000 (``unit_magnitude``)."""
    if found.value is None or found.comparator:
        return None
    key = unit_key(found.unit) if found.unit else ""
    if found.value < 0 and key not in NEGATIVE_UNITS:
        return f"a negative value ({found.value:g}) is not possible in {found.unit or 'no unit'}"
    if key in WHOLE_COUNTS and found.value != int(found.value):
        return f"a count per {found.unit} is a whole number, not {found.value:g}"
    bounds = unit_magnitude(key)
    if bounds is None or bounds[0] <= found.value <= bounds[1]:
        return None
    return f"{found.value:g} {found.unit} is beyond what any result in that unit can be"


def not_a_category(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """A reference category (``High: >=240``, ``Deficiency: <20``) or a note is no result."""
    if is_category(found.name):
        return f"{found.name!r} names a reference category or a note, not an analyte"
    return None


_VALUE_TOKEN = re.compile(r"^[<>]?\d+(?:[.,]\d+)?(?:HH|LL|H|L|\*)?$")
_FLAGGED_TOKEN = re.compile(r"^\d+(?:[.,]\d+)?(?:HH|LL|H|L|\*)$")


def name_holds_no_values(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """A name with results in it (``Haemoglobin 109L 121``) means the row was misread: the
    value taken is then one of several (a cumulative report's earlier column)."""
    tokens = found.name.split()
    numbers = [t for t in tokens[1:] if _VALUE_TOKEN.match(t)]
    with_unit = any(
        _VALUE_TOKEN.match(t) and ("/" in u or u == "%") for t, u in itertools.pairwise(tokens)
    )
    if with_unit or len(numbers) >= 2 or any(_FLAGGED_TOKEN.match(t) for t in tokens[1:]):
        return f"the name {found.name!r} holds numbers that read as results: the row was misread"
    if numbers and tokens[-1] == numbers[-1] and canonical_name(found.name) is None:
        # "Platelets 388" or "Quuxase 104" then 97: a result (this one or the last) may
        # be in the name; "CA 125" looks the same, so an unknown one is refused too
        return f"the name {found.name!r} ends in a number that may be a result"
    return None


_SET_ASIDE = re.compile(
    rf"\([^()]*\)|\[[^\[\]]*\]|(?:{NUM})\s*(?:-|\u2013|\u2014|to|bis|a|\u00e0|tot)\s*(?:{NUM})"
    r"|(?:<=|>=|<|>|\u2264|\u2265)\s*\d+(?:[.,]\d+)?|\d+-[A-Za-z]\w*",
    re.IGNORECASE,
)
_BETWEEN = re.compile(r"(?<![\w.,^/*])\d+(?:[.,]\d+)*(?:HH|LL|H|L)?(?![\w.,^/]|[.,]\d)")


def nothing_between_name_and_value(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """No other number stands between the name, where the line prints it, and the value:
    in ``Quuxase  104  97  U/L`` the result is 104 or 97, and taking 97 (last time's) is the
    silent error a cumulative column makes. Earlier results kept as ``previous`` may."""
    where = found.provenance
    if where is None or where.end <= where.start:
        return None
    at = where.line.casefold().find(found.name.casefold())
    if at < 0 or at + len(found.name) > where.start:
        return None
    between = where.line[at + len(found.name) : where.start]
    # a bracketed qualifier ("(25-OH)"), or a range printed before the value, is no result
    between = _SET_ASIDE.sub(" ", between)
    earlier = {p.value_text for p in found.previous}
    stray = [m.group(0) for m in _BETWEEN.finditer(between) if m.group(0) not in earlier]
    if stray:
        return f"{stray[0]} stands between the name and the value: which one is the result?"
    return None


_LAST_NUMBER = re.compile(r".*\d")
_WORD = re.compile(r"[^\s()\[\],:;]+")
_STOP = frozenset(
    [
        "was",
        "is",
        "are",
        "of",
        "the",
        "and",
        "at",
        "on",
        "in",
        "result",
        "results",
        "level",
        "value",
        "test",
    ]
)


def value_line_names_it(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """The label printed just before the value, when the line does not print the result's
    name, names the same analyte (or is part of a wrapped name): ``Potassium 4.1`` does
    not give Sodium 4.1, whichever line a model took it from."""
    where = found.provenance
    if where is None or where.end <= where.start or _names_on(found.name, where.line):
        return None
    before = where.line[: where.start]
    label = before[m.end() :] if (m := _LAST_NUMBER.match(before)) else before
    words = [w for w in _WORD.findall(label) if _is_label_word(w)]
    if not words:
        return None
    written = " ".join(words)
    own = {w.casefold() for w in _WORD.findall(found.name)}
    if all(w.casefold() in own for w in words):
        return None  # the end of a wrapped name ("Transferase 45 U/L")
    known = canonical_name(written)
    if known is not None and known == (canonical_name(found.name) or found.canonical_name):
        return None
    return f"its line labels the value {written!r}, not {found.name!r}"


def _names_on(name: str, line: str) -> bool:
    return bool(name.strip()) and name.casefold() in line.casefold()


def _is_label_word(word: str) -> bool:
    return (
        len(word) >= 2
        and word[0].isalpha()
        and "/" not in word
        and word.casefold() not in _STOP
        and flag_of(word) is None
        and unit_key(word) not in KNOWN_UNITS
    )


def unit_is_printed(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """The unit is the one the value's line prints, when the line prints one: a model that
    gives ``mg/dL`` for ``Glucose 5.4 mmol/L`` has a plausible number in a wrong unit."""
    where = found.provenance
    if where is None:
        return None
    if not found.unit:
        return _unit_dropped(found, where.line[where.end :])
    if _compact(found.unit) in _compact(where.line):
        return None
    wanted = unit_key(found.unit)
    tokens = [t.strip("()[],;") for t in where.line.split()]
    if any(unit_key(t) == wanted for t in tokens if t):
        return None
    after = [t.strip("()[],;") for t in where.line[where.end :].split()]  # units follow values
    printed = [t for t in after if _looks_like_unit(t)]
    if printed:
        return f"the unit {found.unit!r} is not the one its line prints ({printed[0]!r})"
    return None


def _unit_dropped(found: Biomarker, after: str) -> str | None:
    """A value given without a unit whose line prints one right after it (past a flag):
    a column the extractor did not place (``13,8   g/dL`` under an unknown header word)."""
    if found.value is None:
        return None
    tokens = [t.strip("()[],;|") for t in after.split()][:2]
    if tokens and flag_of(tokens[0]) is not None:
        tokens = tokens[1:]
    if tokens and tokens[0] and _looks_like_unit(tokens[0]):
        return f"no unit is given, but its line prints {tokens[0]!r} after the value"
    return None


def _compact(text: str) -> str:
    folded = "".join(text.split()).casefold().replace(",", ".")
    return folded.replace("\u00b5", "u").replace("\u03bc", "u")


def _looks_like_unit(token: str) -> bool:
    if token == "%" or (unit_key(token) in KNOWN_UNITS and any(c.isalpha() for c in token)):
        return flag_of(token) is None
    return "/" in token and any(c.isalpha() for c in token) and not token[0].isdigit()


Check = Callable[[Biomarker, NumberFormat], str | None]
CHECKS: tuple[Check, ...] = (
    not_a_category,
    name_holds_no_values,
    value_matches_text,
    range_matches_text,
    not_a_reference_bound,
    nothing_between_name_and_value,
    value_line_names_it,
    unit_is_printed,
    flag_agrees,
    unit_plausible,
    value_possible,
    magnitude_plausible,
)


def first_failure(found: Biomarker, fmt: NumberFormat = ANY) -> str | None:
    """The reason of the first check ``found`` fails, or None when it passes them all."""
    for check in CHECKS:
        if (reason := check(found, fmt)) is not None:
            return reason
    return None


def warnings_for(found: Biomarker) -> list[str]:
    """Doubts that do not reject the result."""
    doubts = [EDGE_WARNING] if flag_disagrees(found) and at_range_edge(found) else []
    if found.value is not None and not found.unit and limits_for(found.canonical_name):
        doubts.append(NO_UNIT_WARNING)
    return doubts
