"""A document's number format, decided once from all of its numbers, and numbers read with it.

Labs write ``4,12`` or ``4.12`` for the same decimal, and ``245.000`` or
``245,000`` for the same count. Read one way, a value is off by a factor of
1000; so the format is not guessed per number but decided per document
(``decide``): the numbers that can only be decimals (``4,12``, ``0,92``,
``13.2``, ``1.0004``) and the ones that can only be groups of thousands
(``1.250.000``, ``1.250,5``) vote. Then every value and range is read with
that format (``read``):

* ``,`` (decimal comma): ``4,12`` is 4.12, ``245.000`` 245000, ``1.250`` 1250;
* ``.`` (decimal point): ``4.12`` is 4.12, ``245,000`` 245000, ``1.250`` 1.25;
* undecided (no number could tell, or as many of each): ``1.250`` and
  ``1,250`` could be either, and are refused (``None`` with a reason), never guessed.

A numeral that breaks the decided format (``4,5`` in a decimal-point document,
``0.500`` in a decimal-comma one) is refused as well.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

COMMA, POINT, UNDECIDED = ",", ".", ""

_DATE = re.compile(r"\b\d{1,4}[./-]\d{1,2}[./-]\d{1,4}\b|\b\d{1,2}:\d{2}(?::\d{2})?\b")
_TOKEN = re.compile(r"(?<![\d.,])\d+(?:[.,]\d+)*(?!\d|[.,]\d)")
NUMERAL = re.compile(r"\d+(?:[.,]\d+)*")
_SWAP = str.maketrans(",.", ".,")


@dataclass(frozen=True, slots=True)
class NumberFormat:
    """The decimal mark a document writes (``,``, ``.``, or ``""`` when it cannot be told)."""

    decimal: str = UNDECIDED
    comma_votes: int = 0
    point_votes: int = 0

    @property
    def grouping(self) -> str:
        """The thousands separator: the other mark (``""`` when undecided)."""
        return {COMMA: POINT, POINT: COMMA}.get(self.decimal, UNDECIDED)

    def describe(self) -> str:
        if self.decimal == COMMA:
            return "writes decimals with commas"
        if self.decimal == POINT:
            return "writes decimals with points"
        return "does not show whether it writes decimals with commas or points"


def _vote(numeral: str) -> str:
    """The decimal mark this numeral proves, or ``""`` when it proves nothing."""
    marks = [ch for ch in numeral if ch in ".,"]
    if not marks:
        return UNDECIDED
    if len(set(marks)) == 2:  # 1.250,5 or 1,250.5: the last mark is the decimal one
        return marks[-1]
    mark = marks[0]
    if len(marks) > 1:  # 1.250.000: only a thousands separator repeats
        return POINT if mark == COMMA else COMMA
    whole, fraction = numeral.split(mark)
    if len(fraction) != 3 or whole == "0":  # 4,12 / 13.2 / 0,500: a decimal
        return mark
    return UNDECIDED  # 1.250 / 1,250: either


def decide(pages: Sequence[str]) -> NumberFormat:
    """The format the document's numbers show (dates and times set aside)."""
    text = _DATE.sub(" ", "\n".join(pages))
    comma = point = 0
    for match in _TOKEN.finditer(text):
        vote = _vote(match.group(0))
        comma += vote == COMMA
        point += vote == POINT
    decimal = COMMA if comma > point else POINT if point > comma else UNDECIDED
    return NumberFormat(decimal, comma, point)


def _grouped(whole: str, mark: str) -> bool:
    return bool(re.fullmatch(rf"[1-9]\d{{0,2}}(?:{re.escape(mark)}\d{{3}})+", whole))


def read(numeral: str, fmt: NumberFormat, *, whole: bool = False) -> tuple[float | None, str]:
    """The number ``numeral`` states under ``fmt``, or None and why it cannot be read.

    ``whole``: the unit counts things (cells per uL), so the number is whole and an
    undecided ``7,500`` or ``7.500`` can only be 7500.
    """
    if not NUMERAL.fullmatch(numeral):
        return None, f"{numeral!r} is not a number"
    marks = {ch for ch in numeral if ch in ".,"}
    if not marks:
        return float(numeral), ""
    decimal = fmt.decimal
    if decimal == UNDECIDED:
        vote = _vote(numeral)
        if vote == UNDECIDED and whole:
            return float(numeral.replace(",", "").replace(".", "")), ""
        if vote == UNDECIDED:
            return None, (
                f"{numeral!r} could be a decimal or a thousands separator, and the "
                "document's other numbers do not say which"
            )
        decimal = vote
    grouping = POINT if decimal == COMMA else COMMA
    integral, _, fraction = numeral.rpartition(decimal) if decimal in numeral else (numeral, "", "")
    if grouping in integral and not _grouped(integral, grouping):
        return None, f"{numeral!r} is not a number in a document that {_writes(decimal)}"
    if decimal in integral or (fraction and not fraction.isdigit()):
        return None, f"{numeral!r} is not a number in a document that {_writes(decimal)}"
    digits = integral.replace(grouping, "")
    return float(f"{digits}.{fraction}" if fraction else digits), ""


def _writes(decimal: str) -> str:
    return "writes decimals with commas" if decimal == COMMA else "writes decimals with points"


def read_value_text(
    value_text: str, fmt: NumberFormat, *, whole: bool = False
) -> tuple[float | None, str]:
    """The first numeral of a written value (``<0,3``, ``245.000``) read under ``fmt``."""
    match = NUMERAL.search(value_text)
    if match is None:
        return None, ""
    return read(match.group(0), fmt, whole=whole)


def to_working(line: str, fmt: NumberFormat) -> str:
    """``line`` with every numeral written as a decimal-point document would, same length.

    ``4,12`` becomes ``4.12`` and ``245.000`` becomes ``245,000`` in a decimal-comma
    document; numerals that break the format are left as written (the checks refuse them).
    """
    if fmt.decimal != COMMA:
        return line

    def swap(match: re.Match[str]) -> str:
        text = match.group(0)
        number, _ = read(text, fmt)
        if number is None:
            return text
        return text.translate(_SWAP)

    return _TOKEN.sub(swap, line)
