"""A curated table of common lab analytes: canonical name -> names labs print for it.

Aliases are written as labs write them, in English and German (and a few French);
they are normalised with ``saga.steps.normalize.name_key`` when the index is
built, so case, punctuation, word order, British spelling, accents and filler
words need no entries of their own. Distinct tests stay distinct on purpose: CRP
vs hs-CRP, total vs direct bilirubin, urea vs urea nitrogen. A name the table does
not know is looked up once more without its bracketed qualifiers (``TSH (3rd generation)`` is TSH).
"""

from __future__ import annotations

import functools
import re

from saga.steps.normalize import name_key

# canonical name: aliases separated by "|"
_TABLE = """
Hemoglobin A1c: HbA1c | Hb A1c | HgbA1c | Hgb A1c | A1C | Glycated hemoglobin | Glycohemoglobin
    | Glycated hemoglobin A1c | Glycated hemoglobin (HbA1c) | Hemoglobin A1c (HbA1c)
    | Haemoglobin A1c
Glucose: Glukose | Blutzucker | Nüchternglukose | Glucose nüchtern | Glucose | Fasting glucose
    | Glucose fasting | Blood sugar | FBG | FPG
    | Glycémie | Glycémie à jeun
Insulin: Insulin | Fasting insulin
Total cholesterol: Cholesterin | Gesamtcholesterin | Cholesterin gesamt | Cholesterol
    | Total cholesterol | TC | Cholesterol total
    | Cholestérol total
LDL cholesterol: LDL-Cholesterin | LDL | LDL-C | LDL cholesterol | Low density lipoprotein
    | LDL calc | Low density lipoprotein cholesterol | LDL-Cholesterol direct
HDL cholesterol: HDL-Cholesterin | HDL | HDL-C | HDL cholesterol | High density lipoprotein
    | High density lipoprotein cholesterol
Non-HDL cholesterol: Non-HDL | Non-HDL cholesterol | Non HDL-C
Triglycerides: Triglyzeride | Triglycerides | Triglyceride | TG | TRIG
    | Triglycérides
Hemoglobin: Hämoglobin | Hemoglobin | Hb | Hgb
    | Hémoglobine
Hematocrit: Hämatokrit | Hematocrit | Hct | PCV | Packed cell volume
    | Hématocrite
White blood cell count: Leukozyten | Leukocyte count | WBC count | Total leukocyte count | WBC
    | White blood cells | White cell count | Leukocytes | Total white cell count
    | White cell count total | Leucocytes
Red blood cell count: Erythrozyten | RBC count | RBC | Red blood cells | Red cell count
    | Erythrocytes
    | Hématies
Platelet count: Thrombozyten | Platelets | PLT | Platelet count | Thrombocytes
    | Plaquettes
Mean corpuscular volume: MCV | Mean cell volume
    | VGM
Mean corpuscular hemoglobin: MCH | Mean cell hemoglobin
Mean corpuscular hemoglobin concentration: MCHC | Mean cell hemoglobin concentration
Red cell distribution width: RDW | RDW-CV | Red cell distribution width
Sodium: Natrium | Sodium | Na
Potassium: Kalium | Potassium | K
Chloride: Chlorid | Chloride | Cl
Bicarbonate: Bicarbonate | CO2 | Carbon dioxide | HCO3 | Total CO2
Blood urea nitrogen: BUN | Urea nitrogen | Blood urea nitrogen
Creatinine: Kreatinin | Creatinine | Creat | Cr
    | Créatinine
eGFR: eGFR | Estimated GFR | GFR estimated | Glomerular filtration rate
    | Estimated glomerular filtration rate | eGFR CKD-EPI | eGFR (CKD-EPI)
Calcium: Kalzium | Calcium | Ca | Total calcium
Magnesium: Magnesium | Mg
Total protein: Gesamteiweiß | Gesamtprotein | Total protein | Protein total | TP
Albumin: Albumin | Alb
Total bilirubin: Bilirubin gesamt | Gesamtbilirubin | Bilirubin | Total bilirubin
    | Bilirubin total | TBIL
Alkaline phosphatase: Alkalische Phosphatase | Alkaline phosphatase | ALP | Alk phos
Alanine aminotransferase: GPT | ALAT | ALT (GPT) | ALT | SGPT | Alanine aminotransferase
    | ALT (SGPT)
Aspartate aminotransferase: GOT | ASAT | AST (GOT) | AST | SGOT | Aspartate aminotransferase
    | AST (SGOT)
Gamma-glutamyl transferase: Gamma-GT | GGT | Gamma GT | Gamma-glutamyl transferase | GGTP
Uric acid: Harnsäure | Uric acid | Urate
    | Acide urique
Thyroid stimulating hormone: TSH basal | TSH | Thyrotropin | Thyroid stimulating hormone
    | TSH (3rd generation)
Free T4: fT4 (freies Thyroxin) | Freies T4 | Free T4 | FT4 | Free thyroxine | Thyroxine free
Free T3: Freies T3 | Free T3 | FT3 | Free triiodothyronine
Vitamin D (25-hydroxy): Vitamin D | 25-OH Vitamin D | 25-Hydroxyvitamin D
    | Vitamin D 25-Hydroxy | Vitamin D, 25-OH | 25(OH)D | Calcidiol
Vitamin B12: Vitamin B12 | B12 | Cobalamin | Cyanocobalamin
Folate: Folsäure | Folate | Folic acid | Serum folate
Ferritin: Ferritin
    | Ferritine
Iron: Eisen | Iron | Fe | Serum iron
Total iron binding capacity: TIBC | Total iron binding capacity | Iron binding capacity
Transferrin saturation: Transferrinsättigung | Transferrin saturation | TSAT | Iron saturation
C-reactive protein: C-reaktives Protein | CRP | C-reactive protein | C reactive protein
High-sensitivity C-reactive protein: hs-CRP | hsCRP | High sensitivity CRP
    | C-reactive protein (high sensitivity) | CRP high sensitivity | hs CRP
Erythrocyte sedimentation rate: BSG | Blutsenkung | Blutkörperchensenkungsgeschwindigkeit | ESR
    | Sed rate | Sedimentation rate
Homocysteine: Homocysteine
Prostate-specific antigen: PSA | Prostate specific antigen | Total PSA
Neutrophils: Neutrophils | Neutrophile | Neutrophiles
Lymphocytes: Lymphocytes | Lymphozyten
Monocytes: Monocytes | Monozyten
Eosinophils: Eosinophils | Eosinophile
Basophils: Basophils | Basophile
Urea: Urea | Harnstoff | Serum urea
Lactate: Lactate | Lactic acid | Laktat
Procalcitonin: Procalcitonin | PCT
Apolipoprotein B: Apolipoprotein B | ApoB | Apo B
Testosterone: Testosterone | Total testosterone | Testosteron
Estimated average glucose: Estimated average glucose | eAG
Lipoprotein(a): Lipoprotein(a) | Lp(a) | Lipoprotein a
Phosphate: Phosphate | Phosphorus | Phosphat | Inorganic phosphate
Lactate dehydrogenase: LDH | Lactate dehydrogenase | LD
Creatine kinase: CK | Creatine kinase | CPK
Amylase: Amylase
Lipase: Lipase
Cortisol: Cortisol
Troponin: Troponin | Troponin T | Troponin I | hs-Troponin
NT-proBNP: NT-proBNP | NT pro BNP
INR: INR | International normalized ratio
"""
_BRACKETS = re.compile(r"\([^()]*\)|\[[^\]]*\]")


def _parse(table: str) -> dict[str, tuple[str, ...]]:
    # a line starting with "|" goes on with the aliases of the line above
    joined = re.sub(r"\n[ \t]+\|", " |", table.strip())
    rows = (line.split(": ", 1) for line in joined.splitlines())
    return {name: tuple(alias.strip() for alias in aliases.split("|")) for name, aliases in rows}


SYNONYMS: dict[str, tuple[str, ...]] = _parse(_TABLE)


@functools.cache
def alias_index() -> dict[str, str]:
    """name_key of every alias (and canonical name) -> canonical name; built once."""
    index: dict[str, str] = {}
    for canonical, aliases in SYNONYMS.items():
        for alias in (canonical, *aliases):
            key = name_key(alias)
            if index.setdefault(key, canonical) != canonical:
                raise ValueError(f"synonym {alias!r} belongs to two analytes")
    return index


@functools.lru_cache(maxsize=8192)
def canonical_name(name: str) -> str | None:
    """The table's canonical name for ``name`` (after normalisation), or None.

    ``Thyroid Stimulating Hormone (3rd generation)`` is tried as written, then
    without its bracketed qualifier.
    """
    index = alias_index()
    found = index.get(name_key(name))
    if found is None and (bare := _BRACKETS.sub(" ", name)) != name and bare.strip():
        found = index.get(name_key(bare))
    return found
