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
CMP = r"<=|>=|≤|≥|<|>"
_VALUE = re.compile(rf"(?P<cmp>{CMP})?\s*(?P<num>{NUM})")
_RANGE_BODY = (
    rf"(?P<lo>{NUM})\s*(?:-|\u2013|\u2014|to)\s*(?P<hi>{NUM})|(?P<op>{CMP})\s*(?P<bound>{NUM})"
)
# "(ref 4.0-5.6)", "[<5.7]", "Reference range: 70 - 99", "normal: <200"
_RANGE = re.compile(
    r"[(\[]?\s*(?:(?:ref(?:erence)?|normal)\.?(?:\s+(?:range|interval|values?))?\s*:?\s*)?"
    rf"(?:{_RANGE_BODY})\s*[)\]]?(?=\s|$)",
    re.IGNORECASE,
)
_UNIT = re.compile(
    r"(?:%|(?:x\s?)?10[\^*eE]?\d+/[A-Za-zµμ]+|/?[A-Za-zµμ][A-Za-z0-9µμ/^*.%]*)(?=\s|$)"
)


def words(text: str) -> frozenset[str]:
    """A set of the whitespace-separated words of ``text`` (keeps word tables short)."""
    return frozenset(text.split())


# words a sentence puts after a number that are not units ("repeat in 3 months")
_NOT_UNITS = words(
    "of and or the in for to at on by was is are with from months month days day "
    "weeks week years year hours hour minutes times"
)
_ABNORMAL = "abnormal"
_FLAGS: dict[str, Flag | str] = {
    **dict.fromkeys(("H", "HH", "H*", "*H", "(H)", "HIGH", "High", "high"), Flag.HIGH),
    **dict.fromkeys(("L", "LL", "L*", "*L", "(L)", "LOW", "Low", "low"), Flag.LOW),
    **dict.fromkeys(("N", "NORMAL", "Normal", "normal"), Flag.NORMAL),
    # an abnormal marker without a direction: the direction comes from the range
    **dict.fromkeys(("*", "!", "A", "ABN", "Abnormal", "ABNORMAL", "abnormal"), _ABNORMAL),
}
QUALITATIVE = words(
    "negative positive reactive non-reactive nonreactive detected not-detected trace "
    "normal abnormal absent present clear cloudy yellow none"
)


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


def to_float(text: str) -> float:
    """``"1,250.5"`` -> 1250.5."""
    return float(text.replace(",", ""))


def parse_range(text: str) -> Range | None:
    """A whole string as a reference range, or None."""
    match = _RANGE.fullmatch(text.strip())
    return _range_of(match) if match else None


def _range_of(match: re.Match[str]) -> Range:
    body = re.search(_RANGE_BODY, match.group(0))
    text = " ".join(body.group(0).split()) if body else match.group(0)
    if match.group("lo") is not None:
        return Range(text, to_float(match.group("lo")), to_float(match.group("hi")))
    op, bound = match.group("op"), to_float(match.group("bound"))
    if op in ("<", "<=", "≤"):
        return Range(text, high=bound, strict_high=op == "<")
    return Range(text, low=bound, strict_low=op == ">")


def flag_of(token: str) -> Flag | str | None:
    """The flag a token stands for; ``"abnormal"`` for a marker with no direction."""
    return _FLAGS.get(token.strip())


def compute_flag(value: float | None, rng: Range | None) -> Flag:
    """High, low or normal against the range; unknown without a value or a range."""
    if value is None or rng is None:
        return Flag.UNKNOWN
    if rng.high is not None and (value > rng.high or (rng.strict_high and value == rng.high)):
        return Flag.HIGH
    if rng.low is not None and (value < rng.low or (rng.strict_low and value == rng.low)):
        return Flag.LOW
    return Flag.NORMAL


def final_flag(explicit: Flag | str | None, value: float | None, rng: Range | None) -> Flag:
    """An explicit high/low/normal wins; an abnormal marker or none is computed."""
    if isinstance(explicit, Flag):
        return explicit
    return compute_flag(value, rng)


def parse_value(text: str) -> tuple[float | None, str, str] | None:
    """Leading result of ``text``: (value or None if censored, as written, rest)."""
    match = _VALUE.match(text)
    if match is None or not _ends_token(text, match.end()):
        return None
    written = match.group(0).replace(" ", "")
    value = None if match.group("cmp") else to_float(match.group("num"))
    return value, written, text[match.end() :].strip()


def _ends_token(text: str, end: int) -> bool:
    return end == len(text) or text[end].isspace()


def parse_tail(text: str) -> tuple[str, Range | None, Flag | str | None] | None:
    """Unit, range and flag after a result, each at most once, in any order."""
    unit, rng, flag = "", None, None
    rest = _split_attached(text).strip()
    while rest:
        match = _RANGE.match(rest)
        token = rest.split(maxsplit=1)[0]
        if match and rng is None:
            rng, rest = _range_of(match), rest[match.end() :]
        elif token in _FLAGS and flag is None:
            flag, rest = _FLAGS[token], rest[len(token) :]
        elif (unit_match := _UNIT.match(rest)) and not unit and _is_unit(unit_match.group(0)):
            unit, rest = unit_match.group(0), rest[unit_match.end() :]
        else:
            return None
        rest = rest.strip()
    return unit, rng, flag


def _is_unit(token: str) -> bool:
    return token.lower() not in _NOT_UNITS and token not in _FLAGS


def _split_attached(text: str) -> str:
    # "6.1%" and "105*" carry a unit or flag glued to the number
    return re.sub(r"(\d)([%*])(?=\s|$)", r"\1 \2", text)


def parse_result(text: str) -> Result | None:
    """``6.1 % 4.0-5.6 H`` and friends; None when the text is not a result."""
    head = parse_value(_split_attached(" ".join(text.split())))
    if head is None:
        return None
    value, written, rest = head
    tail = parse_tail(rest)
    if tail is None:
        return None
    unit, rng, flag = tail
    return Result(value, written, unit, rng, flag)


def biomarker(name: str, result: Result) -> Biomarker:
    """The Biomarker for ``name`` and a parsed result, with its flag settled."""
    rng = result.range
    return Biomarker(
        name=name,
        value=result.value,
        value_text=result.value_text,
        unit=result.unit,
        reference_low=rng.low if rng else None,
        reference_high=rng.high if rng else None,
        reference_text=rng.text if rng else "",
        flag=final_flag(result.flag, result.value, rng),
    )
