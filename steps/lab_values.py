"""The pieces of a lab result line: value, unit, reference range and flag.

Plain functions on short strings, used by ``saga.steps.lab_rows``. ``parse_result``
reads ``<value> <tail>`` where the tail holds at most one unit, one reference
range and one flag, in any order (``105 H mg/dL 70-99`` and
``105 mg/dL (ref 70-99) H`` both work).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from saga.steps.models import Biomarker, Flag

NUM = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+"
# "> OR = 60" is how some US labs print >=
CMP = (
    "less\\s+than\\s+or\\s+equal\\s+to|greater\\s+than\\s+or\\s+equal\\s+to"
    "|less\\s+than|greater\\s+than|more\\s+than|up\\s+to"
    "|<\\s*or\\s*=|>\\s*or\\s*=|<=|>=|=<|=>|\u2264|\u2265|<|>"
)
_VALUE = re.compile(rf"(?P<cmp>{CMP})?\s*(?P<num>{NUM})", re.IGNORECASE)
# "a to b" in English, German (bis), Spanish/Portuguese (a), French (à), Dutch (tot)
_RANGE_BODY = (
    rf"(?P<lo>{NUM})\s*(?:-|\u2013|\u2014|to|bis|a|\u00e0|tot)\s*(?P<hi>{NUM})"
    rf"|(?P<op>{CMP})\s*(?P<bound>{NUM})"
)
_RANGE_BODY_RE = re.compile(_RANGE_BODY, re.IGNORECASE)
# "(ref 4.0-5.6)", "[<5.7]", "Reference range: 70 - 99", "(Normal: 70 - 100)"; in any
# language a one-word label with a colon: "N: 3,9-5,5", "VR: 70-99", "Norm: < 5,2"
_RANGE = re.compile(
    r"[(\[]?\s*(?:(?:ref(?:erence)?|normal)\.?(?:\s+(?:range|interval|values?))?\s*:?\s*"
    r"|[^\W\d_]{1,14}\.?\s*:\s*)?"
    rf"(?:{_RANGE_BODY})\s*[)\]]?(?=\s|$)",
    re.IGNORECASE,
)
_SUPER = "\u00b2\u00b3\u00b9\u2070\u2074-\u2079"
_UNIT = re.compile(
    rf"(?:%|(?:[xX\u00d7]\s?)?10\s?[\^*eE]?[\d{_SUPER}]+\s?/\s?[^\W\d_]+|mL/min/1\.73\s?m[2²]"
    rf"|/?[^\W\d_][\w/^*.%{_SUPER}]*)(?=\s|$)"
)
# a value's span where a row's result starts (comparator, number, as written)
VALUE_AT = re.compile(rf"\s*(?P<v>(?:(?:{CMP})\s*)?(?:{NUM}))", re.IGNORECASE)


def words(text: str) -> frozenset[str]:
    """A set of the whitespace-separated words of ``text`` (keeps word tables short)."""
    return frozenset(text.split())


# words a sentence puts after a number that are not units ("repeat in 3 months")
_NOT_UNITS = words(
    "of and or the in for to at on by was is are with from months month days day "
    "weeks week years year hours hour minutes times und oder"
)
_ABNORMAL = "abnormal"
_DIRECTIONLESS_FLAGS = (
    "* ! A ABN Abnormal ABNORMAL abnormal (A) CRITICAL Critical critical CRIT PANIC"
)
_DIRECTIONLESS = _DIRECTIONLESS_FLAGS.split()
_UP, _DOWN, _MINUS = "\u25b2 \u2191", "\u25bc \u2193", "\u2212"
_FLAGS: dict[str, Flag | str] = {
    **dict.fromkeys(
        f"H HH H* *H (H) HIGH High high (High) (HIGH) + ++ +++ {_UP}".split(), Flag.HIGH
    ),
    **dict.fromkeys(
        f"L LL L* *L (L) LOW Low low (Low) (LOW) - -- {_MINUS} {_MINUS * 2} {_DOWN}".split(),
        Flag.LOW,
    ),
    **dict.fromkeys(["N", "(N)", "NORMAL", "Normal", "normal", "(Normal)"], Flag.NORMAL),
    # an abnormal marker without a direction: the direction comes from the range
    **dict.fromkeys(
        _DIRECTIONLESS,
        _ABNORMAL,
    ),
}
QUALITATIVE = words(
    "negative positive reactive non-reactive nonreactive detected not-detected trace "
    "normal abnormal absent present clear cloudy yellow none negativ positiv "
    "nicht-nachweisbar nachweisbar 1+ 2+ 3+ 4+ small moderate large"
)
_COMPARATORS = {"<": "<", ">": ">", "<=": "<=", ">=": ">=", "=<": "<=", "=>": ">="}
_COMPARATORS |= {"\u2264": "<=", "\u2265": ">=", "<or=": "<=", ">or=": ">="}
_COMPARATORS |= {"lessthan": "<", "greaterthan": ">", "morethan": ">", "upto": "<="}
_COMPARATORS |= {"lessthanorequalto": "<=", "greaterthanorequalto": ">="}


@dataclass(frozen=True, slots=True)
class Range:
    """A reference range: bounds, whether each is strict, and the text as written."""

    text: str
    low: float | None = None
    high: float | None = None
    strict_low: bool = False
    strict_high: bool = False


@dataclass(frozen=True, slots=True)
class Result:
    """A parsed ``<value> <tail>``: everything but the analyte name."""

    value: float | None
    value_text: str
    unit: str = ""
    range: Range | None = None
    flag: Flag | str | None = None
    comparator: str = ""


def to_float(text: str) -> float:
    """``"1,250.5"`` -> 1250.5."""
    return float(text.replace(",", ""))


def comparator_of(written: str) -> str:
    """``"> OR ="`` -> ``">="``, ``"≤"`` -> ``"<="``; ``""`` for none."""
    return _COMPARATORS.get("".join(written.lower().split()), "")


def parse_range(text: str) -> Range | None:
    """A whole string as a reference range, or None."""
    match = _RANGE.fullmatch(text.strip())
    return _range_of(match) if match else None


def _range_of(match: re.Match[str]) -> Range:
    body = _RANGE_BODY_RE.search(match.group(0))
    text = " ".join(body.group(0).split()) if body else match.group(0)
    if match.group("lo") is not None:
        return Range(text, to_float(match.group("lo")), to_float(match.group("hi")))
    op, bound = comparator_of(match.group("op")), to_float(match.group("bound"))
    if op.startswith("<"):
        return Range(text, high=bound, strict_high=op == "<")
    return Range(text, low=bound, strict_low=op == ">")


def flag_of(token: str) -> Flag | str | None:
    """The flag a token stands for; ``"abnormal"`` for a marker with no direction."""
    return _FLAGS.get(token.strip())


def compute_flag(value: float | None, rng: Range | None, comparator: str = "") -> Flag:
    """High, low or normal against the range; unknown when it cannot be told.

    A censored value (``<0.3``) is compared only where its direction settles it:
    ``<0.3`` against ``< 5`` is normal, against ``10-20`` low.
    """
    if value is None or rng is None:
        return Flag.UNKNOWN
    if comparator:
        return _censored_flag(value, rng, comparator)
    if rng.high is not None and (value > rng.high or (rng.strict_high and value == rng.high)):
        return Flag.HIGH
    if rng.low is not None and (value < rng.low or (rng.strict_low and value == rng.low)):
        return Flag.LOW
    return Flag.NORMAL


def _censored_flag(value: float, rng: Range, comparator: str) -> Flag:
    below = comparator.startswith("<")
    if below and rng.low is not None and value <= rng.low:
        return Flag.LOW
    if not below and rng.high is not None and value >= rng.high:
        return Flag.HIGH
    if below and rng.low is None and rng.high is not None and value <= rng.high:
        return Flag.NORMAL
    if not below and rng.high is None and rng.low is not None and value >= rng.low:
        return Flag.NORMAL
    return Flag.UNKNOWN


def final_flag(
    explicit: Flag | str | None, value: float | None, rng: Range | None, comparator: str = ""
) -> Flag:
    """An explicit high/low/normal wins; an abnormal marker or none is computed."""
    if isinstance(explicit, Flag):
        return explicit
    return compute_flag(value, rng, comparator)


def parse_value(text: str) -> tuple[float, str, str, str] | None:
    """Leading result of ``text``: (value, comparator, as written, rest)."""
    match = _VALUE.match(text)
    if match is None or not _ends_token(text, match.end()):
        return None
    written = match.group(0).replace(" ", "")
    comparator = comparator_of(match.group("cmp") or "")
    return to_float(match.group("num")), comparator, written, text[match.end() :].strip()


def _ends_token(text: str, end: int) -> bool:
    return end == len(text) or text[end].isspace()


def parse_tail(text: str) -> tuple[str, Range | None, Flag | str | None] | None:
    """Unit, range and flag after a result, in any order.

    A unit may be repeated after the range (``11.2 g/dL 12.0 - 15.5 g/dL``) and
    flags may be doubled when they agree (``▼ (L)``); anything else is not a result.
    """
    unit, rng, flag = "", None, None
    rest = _split_attached(text).strip()
    while rest:
        match = _RANGE.match(rest)
        token = rest.split(maxsplit=1)[0]
        if match and rng is None:
            rng, rest = _range_of(match), rest[match.end() :]
        elif token in _FLAGS and _flags_agree(flag, _FLAGS[token]):
            flag = flag if isinstance(flag, Flag) else _FLAGS[token]
            rest = rest[len(token) :]
        elif (unit_match := _UNIT.match(rest)) and _is_unit(unit_match.group(0), unit):
            unit, rest = unit_match.group(0), rest[unit_match.end() :]
        else:
            return None
        rest = rest.strip()
    return unit, rng, flag


def _flags_agree(held: Flag | str | None, token: Flag | str) -> bool:
    # "CRITICAL HIGH": a directionless marker and a direction agree; HIGH and LOW do not
    return held is None or held == token or _ABNORMAL in (held, token)


def _is_unit(token: str, unit: str) -> bool:
    if unit:  # only the same unit again
        return token.lower() == unit.lower()
    return (
        token.lower() not in _NOT_UNITS
        and token not in _FLAGS
        and not (token.endswith(".") and len(token) > 1)  # "weeks." ends a sentence
    )


_GLUED = re.compile(r"(\d)([%*!]|HH|LL|H|L)(?=\s|$)")


def _split_attached(text: str) -> str:
    # "6.1%", "105*", "118L", "11.8H" carry a unit or flag glued to the number
    return _GLUED.sub(r"\1 \2", text)


def parse_result(text: str) -> Result | None:
    """``6.1 % 4.0-5.6 H`` and friends; None when the text is not a result."""
    head = parse_value(_split_attached(" ".join(text.split())))
    if head is None:
        return None
    value, comparator, written, rest = head
    tail = parse_tail(rest)
    if tail is None:
        return None
    unit, rng, flag = tail
    return Result(value, written, unit, rng, flag, comparator)


def biomarker(name: str, result: Result) -> Biomarker:
    """The Biomarker for ``name`` and a parsed result, with its flag settled."""
    rng = result.range
    return Biomarker(
        name=name,
        value=result.value,
        value_text=result.value_text,
        comparator=result.comparator,
        unit=result.unit,
        reference_low=rng.low if rng else None,
        reference_high=rng.high if rng else None,
        reference_text=rng.text if rng else "",
        flag=final_flag(result.flag, result.value, rng, result.comparator),
    )
