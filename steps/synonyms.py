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
    | Hemoglobina glicosilada | Hemoglobina glicada | HbA1c (IFCC) | Hémoglobine glyquée
    | Emoglobina glicata | Hemoglobina A1c | Geglyceerd hemoglobine | Glykohemoglobin
    | Glykeret hæmoglobin
Glucose: Glukose | Blutzucker | Nüchternglukose | Glucose nüchtern | Glukose nüchtern | Glucose
    | Fasting glucose
    | Glucose fasting | Blood sugar | FBG | FPG
    | Glycémie | Glycémie à jeun
    | Glucosa | Glucosa basal | Glucosio | Glicemia | Glicose | Glucemia | Glukos | Glukose
    | Nuchter glucose | Glucose nuchter | Glucosa en ayunas | Glicemia a digiuno
    | Glicose em jejum
Insulin: Insulin | Fasting insulin
    | Insulina | Insuline
Total cholesterol: Cholesterin | Gesamtcholesterin | Cholesterin gesamt | Cholesterol
    | Total cholesterol | TC | Cholesterol total
    | Cholestérol total
    | Colesterol total | Colesterol | Colesterolo totale | Colesterolo | Cholestérol
    | Cholesterol totaal | Totaal cholesterol | Kolesterol | Total kolesterol | Gesamt-Cholesterin
LDL cholesterol: LDL-Cholesterin | LDL | LDL-C | LDL cholesterol | Low density lipoprotein
    | LDL calc | Low density lipoprotein cholesterol | LDL-Cholesterol direct
    | Colesterol LDL | LDL colesterol | Colesterolo LDL | Cholestérol LDL | LDL-cholestérol
    | LDL-kolesterol | LDL-cholesterol
HDL cholesterol: HDL-Cholesterin | HDL | HDL-C | HDL cholesterol | High density lipoprotein
    | High density lipoprotein cholesterol
    | Colesterol HDL | HDL colesterol | Colesterolo HDL | Cholestérol HDL | HDL-cholestérol
    | HDL-kolesterol | HDL-cholesterol
Non-HDL cholesterol: Non-HDL | Non-HDL cholesterol | Non HDL-C
Triglycerides: Triglyzeride | Triglycerides | Triglyceride | TG | TRIG
    | Triglycérides
    | Triglicéridos | Trigliceridos | Trigliceridi | Triglicerídeos | Triglicérides
    | Triglyceriden | Triglycerider | Triglyserider | Triglycerid | Triglyceride
Hemoglobin: Hämoglobin | Hemoglobin | Hb | Hgb
    | Hémoglobine
    | Hemoglobina | Emoglobina | Hemoglobine | Hæmoglobin | Hämoglobin (Hb)
Hematocrit: Hämatokrit | Hematocrit | Hct | PCV | Packed cell volume
    | Hématocrite
    | Hematocrito | Ematocrito | Hematócrito | Hematocriet | Hematokrit | Hæmatokrit | EVF
White blood cell count: Leukozyten | Leukocyte count | WBC count | Total leukocyte count | WBC
    | White blood cells | White cell count | Leukocytes | Total white cell count
    | White cell count total | Leucocytes
    | Leucocitos | Leucociti | Leucócitos | Leukocyten | Leukocyter | Leukocytter
    | Leukocytes totales | Globules blancs | Globuli bianchi | Glóbulos blancos
    | Recuento de leucocitos | LPK | Leukocytantal
Red blood cell count: Erythrozyten | RBC count | RBC | Red blood cells | Red cell count
    | Erythrocytes
    | Hématies
    | Hematíes | Eritrocitos | Eritrociti | Eritrócitos | Hemácias | Érythrocytes
    | Globules rouges | Globuli rossi | Glóbulos rojos | Erytrocyten | Erytrocyter | Erytrocytter
    | EPK | Recuento de hematíes
Platelet count: Thrombozyten | Platelets | PLT | Platelet count | Thrombocytes
    | Plaquettes
    | Plaquetas | Piastrine | Trombocyten | Trombocyter | Trombocytter | Recuento de plaquetas
    | TPK | Numération plaquettaire | Thrombocytes
Mean corpuscular volume: MCV | Mean cell volume
    | VGM
    | VCM | Volumen corpuscular medio | Volume globulaire moyen | Volume corpuscolare medio
    | Volume corpuscular médio
Mean corpuscular hemoglobin: MCH | Mean cell hemoglobin
    | HCM | TCMH | Hemoglobina corpuscular media | Hemoglobina corpuscular média
Mean corpuscular hemoglobin concentration: MCHC | Mean cell hemoglobin concentration
    | CHCM | CCMH | Concentración de hemoglobina corpuscular media
Red cell distribution width: RDW | RDW-CV | Red cell distribution width
Sodium: Natrium | Sodium | Na
    | Sodio | Sódio | Natrium (Na)
Potassium: Kalium | Potassium | K
    | Potasio | Potassio | Potássio
Chloride: Chlorid | Chloride | Cl
    | Cloro | Cloruro | Chlore | Chlorure | Cloreto | Klorid
Bicarbonate: Bicarbonate | CO2 | Carbon dioxide | HCO3 | Total CO2
Blood urea nitrogen: BUN | Urea nitrogen | Blood urea nitrogen
Creatinine: Kreatinin | Creatinine | Creat | Cr
    | Créatinine
    | Creatinina | Kreatinine | Kreatinin (Krea)
eGFR: eGFR | Estimated GFR | GFR estimated | Glomerular filtration rate
    | Estimated glomerular filtration rate | eGFR CKD-EPI | eGFR (CKD-EPI)
    | Filtrado glomerular estimado | FG estimado | DFG estimé | DFG | TFG estimada
    | eGFR (CKD-EPI) estimado | eGFR relativ
Calcium: Kalzium | Calcium | Ca | Total calcium
    | Calcio | Cálcio | Kalcium | Calcium total
Magnesium: Magnesium | Mg
    | Magnesio | Magnésio
Total protein: Gesamteiweiß | Gesamtprotein | Total protein | Protein total | TP
    | Proteínas totales | Protéines totales | Proteine totali | Proteínas totais | Totaal eiwit
    | Totalprotein | Protein
Albumin: Albumin | Alb
    | Albúmina | Albumine | Albumina
Total bilirubin: Bilirubin gesamt | Gesamtbilirubin | Bilirubin | Total bilirubin
    | Bilirubin total | TBIL
    | Bilirrubina total | Bilirubine totale | Bilirubina totale | Bilirubine totaal
    | Bilirubin total | Bilirubina
Alkaline phosphatase: Alkalische Phosphatase | Alkaline phosphatase | ALP | Alk phos
    | Fosfatasa alcalina | Phosphatases alcalines | Phosphatase alcaline | Fosfatasi alcalina
    | Fosfatase alcalina | Alkalische fosfatase | Alkaliskt fosfatas | Basisk fosfatase
Alanine aminotransferase: GPT | ALAT | ALT (GPT) | ALT | SGPT | Alanine aminotransferase
    | ALT (SGPT)
    | Alanina aminotransferasa | GPT (ALT) | ALAT (GPT) | TGP | Transaminase pirúvica
    | Alaninaminotransferas
Aspartate aminotransferase: GOT | ASAT | AST (GOT) | AST | SGOT | Aspartate aminotransferase
    | AST (SGOT)
    | Aspartato aminotransferasa | GOT (AST) | ASAT (GOT) | TGO | Transaminase oxalacética
    | Aspartataminotransferas
Gamma-glutamyl transferase: Gamma-GT | GGT | Gamma GT | Gamma-glutamyl transferase | GGTP
    | Gamma glutamil transferasa | Gamma-glutamiltransferasi | Gama GT | GT
    | Gamma-glutamyltransferase
Uric acid: Harnsäure | Uric acid | Urate
    | Acide urique
    | Ácido úrico | Acido urico | Urinezuur | Urat | Urinsyre
Thyroid stimulating hormone: TSH basal | TSH | Thyrotropin | Thyroid stimulating hormone
    | TSH (3rd generation)
    | Tirotropina | TSH (tirotropina) | Thyréostimuline | Tireotropina
Free T4: fT4 (freies Thyroxin) | Freies T4 | Free T4 | FT4 | Free thyroxine | Thyroxine free
    | T4 libre | T4 libera | T4 livre | Vrij T4 | Fritt T4 | Tiroxina libre | Thyroxine libre
    | FT4 (tiroxina libre)
Free T3: Freies T3 | Free T3 | FT3 | Free triiodothyronine
    | T3 libre | T3 libera | T3 livre | Vrij T3 | Fritt T3
Vitamin D (25-hydroxy): Vitamin D | 25-OH Vitamin D | 25-Hydroxyvitamin D
    | Vitamin D 25-Hydroxy | Vitamin D, 25-OH | 25(OH)D | Calcidiol | 25-OH-Vitamin D3
    | Vitamin D, 25-Hydroxy, Total
    | Vitamina D | 25-OH vitamina D | 25-hidroxivitamina D | Vitamine D | 25-OH vitamine D
    | Vitamina D 25-OH | D-vitamin | 25-OH D-vitamin | Vitamine D (25-OH)
Vitamin B12: Vitamin B12 | B12 | Cobalamin | Cyanocobalamin
    | Vitamina B12 | Vitamine B12 | Kobalamin | Cobalamina | B12-vitamin
Folate: Folsäure | Folate | Folic acid | Serum folate
    | Ácido fólico | Acido folico | Folato | Folates | Folati | Foliumzuur | Folat | Folsyre
Ferritin: Ferritin
    | Ferritine
    | Ferritina | Ferritine
Iron: Eisen | Iron | Fe | Serum iron
    | Hierro | Fer | Ferro | Hierro sérico | Fer sérique | IJzer | Järn | Jern
Total iron binding capacity: TIBC | Total iron binding capacity | Iron binding capacity
Transferrin saturation: Transferrinsättigung | Transferrin saturation | TSAT | Iron saturation
    | Saturación de transferrina | Coefficient de saturation de la transferrine | Transferrinmättnad
C-reactive protein: C-reaktives Protein | CRP | C-reactive protein | C reactive protein
    | Proteína C reactiva | PCR | Protéine C réactive | Proteina C reattiva | Proteína C reativa
    | C-reactief proteïne | C-reaktivt protein
High-sensitivity C-reactive protein: hs-CRP | hsCRP | High sensitivity CRP
    | C-reactive protein (high sensitivity) | CRP high sensitivity | hs CRP
Erythrocyte sedimentation rate: BSG | Blutsenkung | Blutkörperchensenkungsgeschwindigkeit | ESR
    | Sed rate | Sedimentation rate
    | VSG | Velocidad de sedimentación | Vitesse de sédimentation | VS | VES | VHS | BSE | SR
    | Sänkningsreaktion | SR (sänka)
Homocysteine: Homocysteine
    | Homocisteína | Homocystéine | Omocisteina | Homocysteïne | Homocystein
Prostate-specific antigen: PSA | Prostate specific antigen | Total PSA
    | Antígeno prostático específico | PSA total | Antigène prostatique spécifique
    | Antigene prostatico specifico
Neutrophils: Neutrophils | Neutrophile | Neutrophiles
    | Neutrófilos | Neutrofili | Polynucléaires neutrophiles | Neutrofielen | Neutrofila
    | Neutrofile
Lymphocytes: Lymphocytes | Lymphozyten
    | Linfocitos | Linfociti | Linfócitos | Lymfocyten | Lymfocyter
Monocytes: Monocytes | Monozyten
    | Monocitos | Monociti | Monócitos | Monocyten | Monocyter
Eosinophils: Eosinophils | Eosinophile
    | Eosinófilos | Eosinofili | Polynucléaires éosinophiles | Eosinofielen | Eosinofila
Basophils: Basophils | Basophile
    | Basófilos | Basofili | Polynucléaires basophiles | Basofielen | Basofila
Urea: Urea | Harnstoff | Serum urea
    | Urée | Ureia | Ureum | Azotemia | Urea sérica
Lactate: Lactate | Lactic acid | Laktat
Procalcitonin: Procalcitonin | PCT
Apolipoprotein B: Apolipoprotein B | ApoB | Apo B
Testosterone: Testosterone | Total testosterone | Testosteron
    | Testosterona | Testostérone
Estimated average glucose: Estimated average glucose | eAG
Lipoprotein(a): Lipoprotein(a) | Lp(a) | Lipoprotein a
Phosphate: Phosphate | Phosphorus | Phosphat | Inorganic phosphate
    | Fósforo | Phosphore | Fosforo | Fosfaat | Fosfat
Lactate dehydrogenase: LDH | Lactate dehydrogenase | LD
    | Lactato deshidrogenasa | LDH (lactato deshidrogenasa) | Lacticodéshydrogénase
Creatine kinase: CK | Creatine kinase | CPK
    | Creatina quinasa | Créatine kinase | Creatinchinasi | Kreatinkinas | CK total
Amylase: Amylase
    | Amilasa | Amilasi
Lipase: Lipase
    | Lipasa | Lipasi
Cortisol: Cortisol
    | Cortisolo
Troponin: Troponin | Troponin T | Troponin I | hs-Troponin
NT-proBNP: NT-proBNP | NT pro BNP
INR: INR | International normalized ratio
    | INR (TP) | PK-INR | PK(INR)
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
