"""Biomarker name normalisation: the comparable form of a name as a lab wrote it.

``normalize_name("Glycated Haemoglobin (HbA1c), serum")`` ->
``"glycated hemoglobin hba1c"``: accents folded, lower case, British spellings
made American, units in brackets and filler words (serum, plasma, level...)
dropped, punctuation turned into spaces, a few word abbreviations (Hb, Vit)
spelled out. ``name_key`` also sorts the words, so
``Cholesterol, Total`` and ``Total cholesterol`` meet.
"""

from __future__ import annotations

import re
import unicodedata

# applied in order on the lower-cased name
_SPELLINGS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"haem", "hem"),
        (r"aemia", "emia"),
        (r"oestr", "estr"),
        (r"leuc", "leuk"),
        (r"oedema", "edema"),
        (r"faec", "fec"),
        (r"colour", "color"),
        (r"glycosylated", "glycated"),
    )
)
# word-level abbreviations, so "Glycosylated Hb A1c" meets "Glycated hemoglobin A1c"
_ABBREVIATIONS = {
    "hb": "hemoglobin",
    "hgb": "hemoglobin",
    "vit": "vitamin",
    "chol": "cholesterol",
    "tot": "total",
}
# a bracket holding a unit: "(mg/dL)", "[%]", "(x10^9/L)"
_UNIT_BRACKET = re.compile(r"[(\[][^)\]]*[/%^][^)\]]*[)\]]")
_FILLER = frozenset(
    (
        "serum",
        "plasma",
        "blood",
        "level",
        "levels",
        "s",
        "test",
        "whole",
        "venous",
        "calc",
        "calculated",
        "measured",
        "result",
    )
)


# Nordic system prefixes: B- blood, P- plasma, S- serum, fP-/fS- fasting. U- (urine),
# Pt-, Csv- and others name another specimen, and so another test: they stay.
_SYSTEM = re.compile(r"^\s*(?:B|P|S|fP|fS|cB|vB|aB|Ery?c\(B\))-(?=[^\W\d_])")
_LETTERS = str.maketrans({"\u00e6": "ae", "\u00c6": "Ae", "\u00f8": "o", "\u00d8": "O"})


def normalize_name(name: str) -> str:
    """The comparable form of ``name``; word order is kept."""
    name = _SYSTEM.sub("", name).translate(_LETTERS)  # "B-Hæmoglobin"
    name = name.replace("\u00df", "ss").replace("\u03b3", "gamma")  # "Gesamteiweiß", "gamma-GT"
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    folded = _UNIT_BRACKET.sub(" ", folded)
    for pattern, replacement in _SPELLINGS:
        folded = pattern.sub(replacement, folded)
    words = re.sub(r"[^a-z0-9]+", " ", folded).split()
    return " ".join(_ABBREVIATIONS.get(word, word) for word in words if word not in _FILLER)


def name_key(name: str) -> str:
    """``normalize_name`` with the words sorted: the lookup key of the synonym table."""
    return " ".join(sorted(normalize_name(name).split()))


def discriminators(key: str) -> frozenset[str]:
    """Words that must agree for two names to match fuzzily.

    Short words and words with digits carry the identity of an analyte (HDL vs
    LDL, B12 vs D, T3 vs T4, A1c) while a typo in them is rare; fuzzy scores
    alone rate "hdl cholesterol" and "ldl cholesterol" as near twins.
    """
    return frozenset(
        word for word in key.split() if len(word) <= 3 or any(c.isdigit() for c in word)
    )
