"""A labelled set of biomarker names for scoring the grouper: each line is one analyte
(its label, the unit its names are reported in) and the names labs print for it,
in English and German, with abbreviations and misspellings.

Written for the evaluation, not taken from the synonym table: about half the names
are table aliases (the offline grouper should get those right), the rest are
variants the table does not list. Near misses that must stay apart sit on separate
lines (HDL/LDL, CRP/hs-CRP, total/direct bilirubin, serum/urine sodium,
creatinine/creatine kinase, neutrophils %/absolute, PSA/free PSA, urea/urea nitrogen).
A name may carry its own unit in square brackets after it.
"""

from __future__ import annotations

import re

import msgspec

_SET = """
glucose [mg/dL]: Glucose | Blutzucker | Nüchternglukose | Fasting glucose | Glucose (fasting)
    | Glukose im Serum | Gluocse | Blood sugar | FPG | Plasma glucose, fasting | Blutglukose
hba1c [%]: HbA1c | Hämoglobin A1c | Glycated hemoglobin | A1c | Glykohämoglobin | HgbA1c
    | Glycosylated haemoglobin | HbA1c (DCCT) | Hb A1c
hemoglobin [g/dL]: Hemoglobin | Hämoglobin | Hb | Haemoglobin | Hgb | Hemoglobn | Haemoglobin (Hb)
total_cholesterol [mg/dL]: Total cholesterol | Cholesterin gesamt | Gesamtcholesterin
    | Cholesterol, total | Cholestrol | Chol. gesamt | Gesamt-Cholesterin
ldl [mg/dL]: LDL cholesterol | LDL-Cholesterin | LDL-C | Low-density lipoprotein | LDL calc.
    | LDL-Chol. | LDL Cholesterol (berechnet)
hdl [mg/dL]: HDL cholesterol | HDL-Cholesterin | HDL-C | High density lipoprotein
    | HDL Cholestrol | HDL-Chol.
triglycerides [mg/dL]: Triglycerides | Triglyzeride | Triglyceride | TG | Trigylcerides
    | Triglyceride i.S. | Neutralfette
creatinine [mg/dL]: Creatinine | Kreatinin | Creat. | Creatinin | Serum creatinine
    | Kreatinin i.S. | Crea
creatine_kinase [U/L]: Creatine kinase | CK | Kreatinkinase | CPK | Creatine phosphokinase
    | CK gesamt
wbc [/nL]: Leukocytes | Leukozyten | WBC | White blood cell count | Leucocytes | Leukocyten
    | White cell count | Leukos
platelets [/nL]: Platelets | Thrombozyten | PLT | Platelet count | Thrombocytes | Thrombos
    | Blutplättchen
alt [U/L]: ALT | GPT | ALAT | Alanine aminotransferase | SGPT | ALT (GPT) | Alanin-Aminotransferase
ast [U/L]: AST | GOT | ASAT | Aspartate aminotransferase | SGOT | Aspartat-Aminotransferase
ggt [U/L]: Gamma-GT | GGT | \u03b3-GT | Gamma-glutamyltransferase | Gamma glutamyl transpeptidase
    | Gamma-GT (GGT)
tsh [mIU/L]: TSH | Thyrotropin | Thyroid stimulating hormone | TSH basal | Thyreotropin
    | TSH (3rd generation) | Thyroidea-stimulierendes Hormon
ft4 [ng/dL]: Free T4 | fT4 | Freies Thyroxin | Free thyroxine | FT4 (freies T4) | Freies T4
ft3 [pg/mL]: Free T3 | fT3 | Freies Trijodthyronin | Free triiodothyronine | Freies T3
vitamin_d [ng/mL]: Vitamin D | 25-OH Vitamin D | 25-Hydroxyvitamin D | Vitamin D3 (25-OH)
    | Calcidiol | 25(OH)D | 25-OH-Vitamin D3
vitamin_b12 [pg/mL]: Vitamin B12 | Cobalamin | Vit. B12 | Cyanocobalamin | Vitamin B 12
ferritin [ng/mL]: Ferritin | Ferritine | Serumferritin | Ferritn | Ferritin i.S.
crp [mg/L]: CRP | C-reactive protein | C-reaktives Protein | C reactive protein | CRP quantitativ
hscrp [mg/L]: hs-CRP | High-sensitivity CRP | hsCRP | CRP hochsensitiv | hs CRP
sodium [mmol/L]: Sodium | Natrium | Na | Na+ | Natrium i.S.
sodium_urine [mmol/L]: Sodium, urine | Natrium im Urin | Urine sodium | Natrium (Urin)
potassium [mmol/L]: Potassium | Kalium | K | K+ | Potasium
bilirubin_total [mg/dL]: Total bilirubin | Bilirubin gesamt | Gesamtbilirubin | Bilirubin, total
    | T. Bili | Bilirubin
bilirubin_direct [mg/dL]: Direct bilirubin | Bilirubin direkt | Conjugated bilirubin | D. Bili
    | Bilirubin, direct
uric_acid [mg/dL]: Uric acid | Harnsäure | Urate | Uric acid serum | Harnsaeure
egfr [mL/min/1.73m2]: eGFR | Estimated GFR | eGFR (CKD-EPI) | GFR geschätzt
    | Glomeruläre Filtrationsrate
urea [mg/dL]: Urea | Harnstoff | Serum urea | Urea (serum)
bun [mg/dL]: BUN | Blood urea nitrogen | Urea nitrogen | Harnstoff-Stickstoff
zinc [ug/dL]: Zinc | Zink | Zn | Zinc, serum | Zink im Serum
selenium [ug/L]: Selenium | Selen | Se | Selenium, serum
lipoprotein_a [nmol/L]: Lipoprotein(a) | Lp(a) | Lipoprotein a | Lipoprotein klein a
apob [mg/dL]: Apolipoprotein B | ApoB | Apo B | Apolipoprotein B-100 | Apo-B
homocysteine [umol/L]: Homocysteine | Homocystein | Hcy | Homocystein i.P.
psa [ng/mL]: PSA | Prostate-specific antigen | Prostataspezifisches Antigen | Total PSA
    | PSA gesamt
free_psa [ng/mL]: Free PSA | freies PSA | fPSA
neutrophils_pct [%]: Neutrophils | Neutrophile | Neutrophile Granulozyten | Neutrophils %
neutrophils_abs [/nL]: Neutrophils, absolute | Neutrophile absolut | ANC
    | Absolute neutrophil count
"""

_UNIT = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\]]+)\]$")


class LabelledName(msgspec.Struct, frozen=True, kw_only=True):
    """One name as a lab prints it, the unit it comes with, and its true analyte."""

    name: str
    unit: str
    group: str


def labelled_names(table: str = _SET) -> list[LabelledName]:
    """Every name of the set, in the order written."""
    joined = re.sub(r"\n[ \t]+\|", " |", table.strip())
    found: list[LabelledName] = []
    for line in joined.splitlines():
        head, names = line.split(": ", 1)
        label = _UNIT.fullmatch(head.strip())
        if label is None:
            raise ValueError(f"the line for {head!r} names no unit")
        for raw in names.split("|"):
            own = _UNIT.fullmatch(raw.strip())
            name, unit = (own["name"], own["unit"]) if own else (raw.strip(), label["unit"])
            found.append(LabelledName(name=name, unit=unit, group=label["name"]))
    return found
