"""What is physically possible for an analyte: its units, value limits and LOINC codes.

``LIMITS`` maps a canonical name (``saga.steps.synonyms``) to the units a lab may
report it in, each with the widest values a living patient can have in that
unit. The limits are deliberately generous (several times the extremes seen in
critical care): they exist to catch misreads such as a thousands separator read
in a decimal-comma document (``Leukozyten 7,500 /nl`` as 7500), not to judge
results. An analyte missing here is not checked.

``LOINC`` gives a code only where it is certain for the canonical name and the
unit's property (mass vs substance concentration): a wrong code is a wrong value.
"""

from __future__ import annotations

import re

Limits = dict[str, tuple[float, float]]

_COUNT = "10^9/l"  # = 10^3/uL = /nL = K/uL
_RBC = "10^12/l"  # = 10^6/uL = /pL
_MASS_SMALL = ("ng/ml", "ug/l")

LIMITS: dict[str, Limits] = {
    "Hemoglobin A1c": {"%": (2, 25), "mmol/mol": (0, 240)},
    "Glucose": {"mg/dl": (5, 3000), "mmol/l": (0.3, 170), "g/l": (0.05, 30)},
    "Insulin": {"uiu/ml": (0, 3000), "miu/l": (0, 3000), "pmol/l": (0, 20000)},
    "Total cholesterol": {"mg/dl": (20, 2000), "mmol/l": (0.5, 52), "g/l": (0.2, 20)},
    "LDL cholesterol": {"mg/dl": (1, 1500), "mmol/l": (0.03, 39)},
    "HDL cholesterol": {"mg/dl": (1, 300), "mmol/l": (0.03, 8)},
    "Non-HDL cholesterol": {"mg/dl": (1, 2000), "mmol/l": (0.03, 52)},
    "Triglycerides": {"mg/dl": (5, 20000), "mmol/l": (0.05, 230)},
    "Hemoglobin": {"g/dl": (1, 26), "g/l": (10, 260), "mmol/l": (0.6, 16)},
    "Hematocrit": {"%": (5, 85), "l/l": (0.05, 0.85)},
    "White blood cell count": {_COUNT: (0.01, 1000)},
    "Red blood cell count": {_RBC: (0.3, 12)},
    "Platelet count": {_COUNT: (1, 5000)},
    "Mean corpuscular volume": {"fl": (40, 180)},
    "Mean corpuscular hemoglobin": {"pg": (8, 70)},
    "Mean corpuscular hemoglobin concentration": {
        "g/dl": (15, 50),
        "g/l": (150, 500),
        "%": (15, 50),
        "mmol/l": (9, 31),
    },
    "Red cell distribution width": {"%": (5, 50), "fl": (20, 150)},
    "Sodium": {"mmol/l": (80, 220), "meq/l": (80, 220)},
    "Potassium": {"mmol/l": (0.8, 15), "meq/l": (0.8, 15)},
    "Chloride": {"mmol/l": (40, 180), "meq/l": (40, 180)},
    "Bicarbonate": {"mmol/l": (1, 70), "meq/l": (1, 70)},
    "Blood urea nitrogen": {"mg/dl": (0.5, 400)},
    "Creatinine": {"mg/dl": (0.03, 40), "umol/l": (3, 3500)},
    "eGFR": {"ml/min/1.73m2": (0, 300), "ml/min": (0, 300)},
    "Calcium": {"mg/dl": (1, 30), "mmol/l": (0.25, 7.5)},
    "Magnesium": {"mg/dl": (0.2, 15), "mmol/l": (0.08, 6)},
    "Total protein": {"g/dl": (1, 20), "g/l": (10, 200)},
    "Albumin": {"g/dl": (0.3, 9), "g/l": (3, 90)},
    "Total bilirubin": {"mg/dl": (0, 80), "umol/l": (0, 1400)},
    "Alkaline phosphatase": {"u/l": (0, 50000), "ukat/l": (0, 850)},
    "Alanine aminotransferase": {"u/l": (0, 50000), "ukat/l": (0, 850)},
    "Aspartate aminotransferase": {"u/l": (0, 50000), "ukat/l": (0, 850)},
    "Gamma-glutamyl transferase": {"u/l": (0, 50000), "ukat/l": (0, 850)},
    "Uric acid": {"mg/dl": (0.1, 40), "umol/l": (5, 2400)},
    "Thyroid stimulating hormone": {"miu/l": (0, 1000), "uiu/ml": (0, 1000)},
    "Free T4": {"ng/dl": (0, 20), "pmol/l": (0, 260)},
    "Free T3": {"pg/ml": (0, 60), "pmol/l": (0, 90)},
    "Vitamin D (25-hydroxy)": {"ng/ml": (0, 400), "nmol/l": (0, 1000), "ug/l": (0, 400)},
    "Vitamin B12": {"pg/ml": (0, 100_000), "pmol/l": (0, 75_000), "ng/l": (0, 100_000)},
    "Folate": {"ng/ml": (0, 200), "nmol/l": (0, 450), "ug/l": (0, 200)},
    "Ferritin": dict.fromkeys(_MASS_SMALL, (0, 200_000)),
    "Iron": {"ug/dl": (0, 1500), "umol/l": (0, 270)},
    "Total iron binding capacity": {"ug/dl": (20, 1500), "umol/l": (4, 270)},
    "Transferrin saturation": {"%": (0, 100)},
    "C-reactive protein": {"mg/l": (0, 1000), "mg/dl": (0, 100)},
    "High-sensitivity C-reactive protein": {"mg/l": (0, 1000), "mg/dl": (0, 100)},
    "Erythrocyte sedimentation rate": {"mm/h": (0, 200)},
    "Homocysteine": {"umol/l": (0, 500)},
    "Prostate-specific antigen": dict.fromkeys(_MASS_SMALL, (0, 100_000)),
    **{
        cell: {"%": (0, 100), _COUNT: (0, 1000)}
        for cell in ("Neutrophils", "Lymphocytes", "Monocytes", "Eosinophils", "Basophils")
    },
    "Urea": {"mmol/l": (0.3, 150), "mg/dl": (1, 900)},
    "Lactate": {"mmol/l": (0, 40), "mg/dl": (0, 360)},
    "Procalcitonin": dict.fromkeys(_MASS_SMALL, (0, 2000)),
    "Apolipoprotein B": {"mg/dl": (0, 1000), "g/l": (0, 10)},
    "Testosterone": {"ng/dl": (0, 10_000), "nmol/l": (0, 350), "ng/ml": (0, 100)},
    "Estimated average glucose": {"mg/dl": (10, 1500), "mmol/l": (0.5, 85)},
}

LOINC: dict[str, tuple[str, frozenset[str]]] = {
    canonical: (code, frozenset(units.split()))
    for canonical, code, units in (
        ("Hemoglobin A1c", "4548-4", "%"),
        ("Glucose", "2345-7", "mg/dl"),
        ("Total cholesterol", "2093-3", "mg/dl"),
        ("HDL cholesterol", "2085-9", "mg/dl"),
        ("Triglycerides", "2571-8", "mg/dl"),
        ("Hemoglobin", "718-7", "g/dl g/l"),
        ("Hematocrit", "4544-3", "%"),
        ("White blood cell count", "6690-2", _COUNT),
        ("Red blood cell count", "789-8", _RBC),
        ("Platelet count", "777-3", _COUNT),
        ("Mean corpuscular volume", "787-2", "fl"),
        ("Mean corpuscular hemoglobin", "785-6", "pg"),
        ("Mean corpuscular hemoglobin concentration", "786-4", "g/dl g/l"),
        ("Sodium", "2951-2", "mmol/l meq/l"),
        ("Potassium", "2823-3", "mmol/l meq/l"),
        ("Chloride", "2075-0", "mmol/l meq/l"),
        ("Blood urea nitrogen", "3094-0", "mg/dl"),
        ("Creatinine", "2160-0", "mg/dl"),
        ("Calcium", "17861-6", "mg/dl"),
        ("Total protein", "2885-2", "g/dl g/l"),
        ("Albumin", "1751-7", "g/dl g/l"),
        ("Total bilirubin", "1975-2", "mg/dl"),
        ("Alkaline phosphatase", "6768-6", "u/l"),
        ("Alanine aminotransferase", "1742-6", "u/l"),
        ("Aspartate aminotransferase", "1920-8", "u/l"),
        ("Gamma-glutamyl transferase", "2324-2", "u/l"),
        ("Thyroid stimulating hormone", "3016-3", "miu/l uiu/ml"),
        ("Vitamin D (25-hydroxy)", "1989-3", "ng/ml ug/l"),
        ("Vitamin B12", "2132-9", "pg/ml ng/l"),
        ("Ferritin", "2276-4", "ng/ml ug/l"),
        ("Iron", "2498-4", "ug/dl"),
        ("C-reactive protein", "1988-5", "mg/l mg/dl"),
        ("Prostate-specific antigen", "2857-1", "ng/ml ug/l"),
    )
}

_SI_COUNTS = {"G/L": _COUNT, "G/l": _COUNT, "T/L": _RBC, "T/l": _RBC}
_SUPERSCRIPTS = str.maketrans("\u00b3\u2076\u2079\u00b9\u00b2", "36912")
_SAME_UNIT = {
    "mie/l": "miu/l",
    "mie/ml": "miu/ml",
    "ie/l": "u/l",
    "e/l": "u/l",
    "ui/l": "u/l",
    "ukat/l": "ukat/l",
    "tsd/ul": _COUNT,
    "gm/dl": "g/dl",
    "gms/dl": "g/dl",
    "gm/l": "g/l",
    "lakh/ul": "lakhs/ul",
    "milh\u00f5es/ul": _RBC,
    "milhoes/ul": _RBC,
    "millones/ul": _RBC,
    "millions/ul": _RBC,
    "mio/ul": _RBC,
    "giga/l": _COUNT,
    "tera/l": _RBC,
    "10^3/ml": "/ul",
    "cel/ul": "/ul",
    "celulas/ul": "/ul",
    "cellules/ul": "/ul",
    "mui/l": "miu/l",
    "uui/ml": "uiu/ml",
    "10^3/ul": _COUNT,
    "k/ul": _COUNT,
    "thou/ul": _COUNT,
    "/nl": _COUNT,
    "10^6/ul": _RBC,
    "m/ul": _RBC,
    "mill/ul": _RBC,
    "/pl": _RBC,
    "iu/l": "u/l",
    "mu/l": "miu/l",
    "uu/ml": "uiu/ml",
    "mm/hr": "mm/h",
    "mm/1h": "mm/h",
    "ml/min/1.73": "ml/min/1.73m2",
    "cells/ul": "/ul",
    "fl.": "fl",
}


def _known_units() -> frozenset[str]:
    return frozenset(unit for limits in LIMITS.values() for unit in limits) | frozenset(_SAME_UNIT)


def _power(match: re.Match[str]) -> str:
    return "10^" + match.group(1).translate(_SUPERSCRIPTS)


def unit_key(unit: str) -> str:
    """The comparable form of a unit: ``x10^3/µL`` -> ``10^9/l``, ``IU/L`` -> ``u/l``."""
    compact = "".join(unit.split())
    if compact in _SI_COUNTS:  # "G/L" is giga per litre (a count), "g/L" grams
        return _SI_COUNTS[compact]
    key = compact.lower().replace("\u00b5", "u").replace("\u03bc", "u")
    key = re.sub(r"10([\u00b3\u2076\u2079\u00b9\u00b2]+)", _power, key).replace("\u00b3", "3")
    key = (
        key.replace("mcg", "ug")
        .replace("mm3", "ul")
        .replace("cumm", "ul")
        .replace("\u00b2", "2")
        .replace("1,73", "1.73")
    )
    key = re.sub(r"^x?10[\^*e]?(\d+)", r"10^\1", key)
    return _SAME_UNIT.get(key, key)


# count units as multiples of one cell per uL (= per mm3 = 10^6/L)
_PER_UL = {"/ul": 1.0, _COUNT: 1e3, _RBC: 1e6, "lakhs/ul": 1e5}
WHOLE_COUNTS = frozenset({"/ul"})
"""Units in which a result is a count of cells: a whole number (``7.5 /mm3`` is a misread)."""
NEGATIVE_UNITS = frozenset({"mmol/l", "meq/l", ""})
"""Units a negative result may have (base excess); elsewhere a minus is a misread."""
# the widest any result in a unit can be, whatever the analyte (misreads by 1000x)
_MAGNITUDE: Limits = {
    "/ul": (0, 20_000_000),
    _COUNT: (0, 5000),
    _RBC: (0, 20),
    "%": (0, 300),
    "mmol/l": (-50, 1000),
    "mg/dl": (0, 30_000),
    "g/dl": (0, 40),
    "g/l": (0, 400),
    "fl": (10, 300),
    "pg": (1, 200),
    "mm/h": (0, 200),
    "mmol/mol": (0, 300),
    "ml/min/1.73m2": (0, 300),
}


def unit_magnitude(key: str) -> tuple[float, float] | None:
    """The widest value any result in unit ``key`` (``unit_key`` form) can have, if known."""
    return _MAGNITUDE.get(key)


def bounds_in(canonical: str, unit: str) -> tuple[float, float] | None:
    """The possible values of ``canonical`` in ``unit``, converted between count units."""
    limits = LIMITS.get(canonical)
    if limits is None:
        return None
    key = unit_key(unit)
    if key in limits:
        return limits[key]
    if key in _PER_UL:
        for known, (low, high) in limits.items():
            if known in _PER_UL:
                factor = _PER_UL[known] / _PER_UL[key]
                return low * factor, high * factor
    return None


def limits_for(canonical: str) -> Limits | None:
    """The units and value limits known for ``canonical``, or None."""
    return LIMITS.get(canonical)


def loinc_for(canonical: str, unit: str) -> str:
    """The LOINC code for ``canonical`` reported in ``unit``; ``""`` when not certain."""
    known = LOINC.get(canonical)
    return known[0] if known and unit_key(unit) in known[1] else ""


KNOWN_UNITS = _known_units()
"""Every unit the table knows, in ``unit_key`` form: a cell holding one is no name."""
