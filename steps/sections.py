"""Section headings and the one-per-line items of the non-lab sections.

``heading`` classifies a line as the start of a section; ``diagnosis``,
``procedure`` and ``genetic`` read one list item each. Plain functions on one
line, used by ``saga.steps.extract_rules``.
"""

from __future__ import annotations

import re
from enum import StrEnum

from saga.steps.models import Diagnosis, GeneticFinding, Procedure


class Section(StrEnum):
    """What the lines under a heading hold."""

    LABS = "labs"
    DIAGNOSES = "diagnoses"
    PROCEDURES = "procedures"
    GENETICS = "genetics"
    NOTES = "notes"  # free text: nothing is extracted from it


_HEADINGS: tuple[tuple[Section, re.Pattern[str]], ...] = tuple(
    (section, re.compile(pattern, re.IGNORECASE))
    for section, pattern in (
        (
            Section.DIAGNOSES,
            r"(?:active |clinical |discharge |working )?"
            r"(?:diagnos[ie]s|assessment|problem list|problems|impressions?)",
        ),
        (
            Section.PROCEDURES,
            r"(?:past |surgical )?(?:procedures?|surgical history)(?: performed)?",
        ),
        (
            Section.GENETICS,
            r"(?:genetic|genomic|pharmacogenomic)s?(?: (?:results|findings|testing|variants))?",
        ),
        # clinical narrative states results in sentences: read it like a lab section
        (
            Section.LABS,
            r"(?:hospital |clinical )?course|history of presenting (?:complaint|illness)"
            r"|history of present illness|investigations|laboratory (?:data|findings)",
        ),
        (
            Section.NOTES,
            r"(?:[a-z]+ )*(?:notes?|comments?|interpretation|disclaimer|methodology|footnotes?"
            r"|history|medications?|allergies|plan|instructions|follow[- ]?up)",
        ),
        # lab panel titles end with a panel word ("Complete Blood Count", "Lipid Panel");
        # "count" alone would turn the diagnosis "Low platelet count" into a heading
        (
            Section.LABS,
            r"(?:[a-z0-9(),&/-]+ )*(?:panel|profile|chemistry|hematology|haematology|urinalysis"
            r"|results?|lipids|labs|tests|(?:complete|full) blood count|cbc)(?: \([a-z0-9 ]+\))?",
        ),
    )
)
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u00b7]|\d{1,2}[.)])\s+")
_LABEL = re.compile(r"^#*\s*(?P<label>[A-Za-z][A-Za-z ,&/()-]{1,48}?)\s*(?::\s*(?P<rest>.*))?$")
_ICD = r"[A-TV-Z]\d[0-9A-Z](?:\.[0-9A-Z]{1,4})?"
_ICD_DOTTED = r"[A-TV-Z]\d[0-9A-Z]\.[0-9A-Z]{1,4}"
_ICD_LABEL = r"(?:ICD-?10(?:-CM)?\s*:?\s*)?"
_CODE_FIRST = re.compile(
    rf"^{_ICD_LABEL}(?P<code>{_ICD})(?P<sep>\s*[-:\u2013]\s*|\s+)(?P<name>\S.*)$"
)
_CODE_LAST = re.compile(
    rf"^(?P<name>.+?)\s*(?:[(\[]\s*{_ICD_LABEL}(?P<code>{_ICD})\s*[)\]]"
    rf"|(?:[-:,\u2013]|\s{{2,}})\s*{_ICD_LABEL}(?P<code2>{_ICD})"
    rf"|\s+{_ICD_LABEL}(?P<code3>{_ICD_DOTTED}))$"
)
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_DATE = (
    rf"\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}|\d{{1,2}} {_MONTH} \d{{4}}"
    rf"|{_MONTH} \d{{1,2}},? \d{{4}}|{_MONTH} \d{{4}}"
)
_DATE_LAST = re.compile(
    rf"^(?P<name>.+?)\s*(?:[-:,\u2013]|\bon\b)?\s*[(\[]?(?P<date>{_DATE})[)\]]?$", re.IGNORECASE
)
_DATE_FIRST = re.compile(rf"^(?P<date>{_DATE})\s*[-:,\u2013]?\s*(?P<name>.+)$", re.IGNORECASE)
_GENE = re.compile(r"^(?P<gene>[A-Z][A-Z0-9]{1,9}(?:-[A-Z0-9]{1,4})?)\s+(?P<rest>\S.*)$")
_GENE_SPLIT = re.compile(r"\s+[-\u2013\u2014]\s+|\s*:\s+|\s{2,}")


def strip_bullet(line: str) -> str:
    """``- item``, ``* item``, ``1. item`` -> ``item``."""
    return _BULLET.sub("", line).strip()


def heading(line: str) -> tuple[Section, str] | None:
    """(section, text after the colon) when ``line`` opens a section, else None.

    Known section names open their section; any other short label that ends
    with a colon and has nothing after it opens a lab section.
    """
    match = _LABEL.match(line.strip())
    if match is None:
        return None
    label, rest = match.group("label").strip(), (match.group("rest") or "").strip()
    for section, pattern in _HEADINGS:
        if pattern.fullmatch(label):
            if section is Section.LABS and rest:
                return None  # "Lipid panel: 3 results" is a sentence, not a heading
            return section, rest
    if line.rstrip().endswith(":") and not rest:
        return Section.LABS, ""
    return None


_INLINE_DIAGNOSIS = re.compile(
    r"(?i)(?<=\S\s)(?:(?:final|discharge|primary|working|admission)\s+)?diagnos[ie]s\s*:\s*"
    r"(?P<text>[^.;:]{3,120})"
)


def inline_diagnoses(line: str) -> list[str]:
    """``... improved. Diagnosis: community-acquired pneumonia. Plan ...`` -> the diagnosis.

    Prose that names its diagnosis after a label mid-line; the text runs to the
    end of the sentence. A label at the start of a line is ``heading``'s.
    """
    return [match.group("text").strip() for match in _INLINE_DIAGNOSIS.finditer(line)]


def diagnosis(line: str) -> Diagnosis | None:
    """``E11.9 Type 2 diabetes``, ``Type 2 diabetes (E11.9)``, ``Hypertension - I10``."""
    text = strip_bullet(line)
    if not text:
        return None
    if (match := _CODE_FIRST.match(text)) and _leading_code(match):
        return Diagnosis(name=_clean(match.group("name")), code=match.group("code"))
    if match := _CODE_LAST.match(text):
        code = match.group("code") or match.group("code2") or match.group("code3")
        return Diagnosis(name=_clean(match.group("name")), code=code)
    return Diagnosis(name=_clean(text))


def _leading_code(match: re.Match[str]) -> bool:
    # "B12 deficiency" starts like a code: trust an undotted code only when a
    # separator, a column gap or a capitalised name follows it
    sep, name = match.group("sep"), match.group("name")
    return "." in match.group("code") or bool(sep.strip()) or len(sep) > 1 or name[0].isupper()


def procedure(line: str) -> Procedure | None:
    """``Colonoscopy - 2023-04-12``, ``2023-04-12 Colonoscopy``, ``Colonoscopy``."""
    text = strip_bullet(line)
    if not text:
        return None
    for pattern in (_DATE_LAST, _DATE_FIRST):
        if match := pattern.match(text):
            return Procedure(name=_clean(match.group("name")), date=match.group("date"))
    return Procedure(name=_clean(text))


def genetic(line: str) -> GeneticFinding | None:
    """``MTHFR c.677C>T - heterozygous``: a gene symbol, a variant, an interpretation."""
    match = _GENE.match(strip_bullet(line))
    if match is None:
        return None
    variant, interpretation = _variant_and_interpretation(match.group("rest"))
    if not variant:
        return None
    return GeneticFinding(
        gene=match.group("gene"), variant=variant, interpretation=_clean(interpretation)
    )


def _variant_and_interpretation(text: str) -> tuple[str, str]:
    parts = _GENE_SPLIT.split(text.strip(), maxsplit=1)
    return parts[0].strip(), parts[1].strip() if len(parts) > 1 else ""


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(" -,:;\u2013")
