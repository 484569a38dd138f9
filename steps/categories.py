"""Lines that look like results and are not: reference categories, comments, footnotes.

A lipid panel prints ``Desirable: <200`` / ``Borderline High: 200-239`` / ``High:
>=240`` under Total cholesterol; a vitamin D result ``Deficiency: <20 ng/mL`` and
``Optimal: > or = 30 ng/mL``. Each has a label and a number with a comparator,
a range or a unit: to a pattern that reads ``name value unit`` they are results.
What gives them away is the label: words that name a category of a range (a
level, a risk, a population, a phase) or a note, never an analyte.

``is_category(name)`` says a name is such a label (every word of it a category
word); ``is_category_line(line)`` says a whole line is a category and its range.
Both are independent of the synonym table: an unknown analyte is not a category,
and a category needs no table to be refused.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_CATEGORY_WORDS = """
    limite muy moderado leve severo normales referencia adultos hombres mujeres ninos
    valeur valeurs hommes femmes enfants
    high low very borderline optimal near above below desirable undesirable normal abnormal
    elevated increased decreased diabetic diabetes prediabetic prediabetes pre non nondiabetic
    risk average moderate mild severe deficiency deficient insufficiency insufficient
    sufficiency sufficient toxicity toxic potential possible probable ideal acceptable target
    goal goals therapeutic critical indeterminate equivocal intermediate inconclusive adult
    adults male males female females men women man woman child children infant infants newborn
    newborns neonate neonates pregnancy pregnant trimester first second third st nd rd th
    follicular luteal phase ovulation ovulatory midcycle postmenopausal premenopausal menopause
    fasting random values value range ranges reference interval category note notes comment
    comments footnote footnotes remark remarks interpretation method and or to of the in for
    with yrs years year age ages over under from inadequate adequate excess excessive optimum
    recommended healthy unhealthy negative positive uncertain alto alta bajo baja deficiencia
    insuficiencia suficiencia toxicidad optimo deseable limitrofe riesgo elevado carence
    insuffisance souhaitable eleve faible risque mangel hoch niedrig erhoht grenzwertig
    wunschenswert optimal normalwert
"""
_WORDS = frozenset(_CATEGORY_WORDS.split())
_BULLET = re.compile(r"^[\s\-*\u2022\u00b7>]*")
_NUMBER = re.compile(r"\d")
_BOUND = re.compile(
    r"\s*(?:<|>|\u2264|\u2265|=|less\b|greater\b|more\b|up\b|below\b|above\b"
    r"|\d+(?:[.,]\d+)?\s*(?:-|\u2013|to\b|a\b|bis\b)\s*\d)",
    re.IGNORECASE,
)
# the label is what precedes the first comparator, range or number on the line
_LABEL = re.compile(
    r"^(?P<label>[^\d<>=\u2264\u2265]*?)\s*[:=]?\s*"
    r"(?=(?:<|>|\u2264|\u2265|=|less\b|greater\b|more\b|up\b|below\b|above\b|\d))",
    re.IGNORECASE,
)


def _fold(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.findall(r"[a-z]+", folded)


@functools.lru_cache(maxsize=4096)
def is_category(name: str) -> bool:
    """Every word of ``name`` names a category of a range or a note (``Borderline High``,
    ``Deficiency``, ``Adult male``, ``Note``): no analyte is named so."""
    words = _fold(name)
    return bool(words) and all(word in _WORDS for word in words)


def is_category_line(line: str) -> bool:
    """A category and its range (``High: >=240``, ``Deficiency: <20 ng/mL``), no result."""
    text = _BULLET.sub("", line)
    match = _LABEL.match(text)
    if match is None or not _NUMBER.search(text):
        return False
    label = match.group("label").strip(" :=-")
    # a bound, not a value: "Fasting  92 mg/dL" is a result, whatever its name
    return bool(label) and is_category(label) and bool(_BOUND.match(text, match.end()))
