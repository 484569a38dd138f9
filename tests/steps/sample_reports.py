"""The synthetic reports that ship in ``saga/samples`` (every name and value is made up)."""

from __future__ import annotations

from saga.steps.models import Diagnosis, Flag, GeneticFinding, Procedure
from tests.steps.pdfgen import GeneTable, Items, Lab, Report, Table, Text

H, L, N, U = Flag.HIGH, Flag.LOW, Flag.NORMAL, Flag.UNKNOWN

ANNUAL_PANEL = Report(
    name="annual_panel",
    record_id="sample-annual-panel",
    user_id="demo-user",
    title="Northwind Diagnostics (synthetic) - Annual Panel",
    pages=(
        (
            Text(("Comprehensive Metabolic Panel",)),
            Table(
                "aligned",
                (
                    Lab("Glucose, Fasting", "105", "mg/dL", "70 - 99", 70, 99, "H", H),
                    Lab("Sodium", "139", "mmol/L", "135-145", 135, 145, "", N),
                    Lab("Potassium", "5.4", "mmol/L", "3.5-5.1", 3.5, 5.1, "", H),
                    Lab("Creatinine", "0.9", "mg/dL", "0.6-1.2", 0.6, 1.2, "", N),
                    Lab("eGFR", "88", "mL/min/1.73m2", "> 60", 60, None, "", N),
                    Lab("ALT (SGPT)", "52", "U/L", "7-56", 7, 56, "", N),
                    Lab("AST (SGOT)", "61", "U/L", "10-40", 10, 40, "*", H),
                ),
            ),
            Text(("Lipid Panel",)),
            Table(
                "aligned",
                (
                    Lab("Cholesterol, Total", "212", "mg/dL", "< 200", None, 200, "H", H),
                    Lab("HDL Cholesterol", "38", "mg/dL", "> 40", 40, None, "L", L),
                    Lab("LDL Cholesterol", "141", "mg/dL", "< 100", None, 100, "H", H),
                    Lab("Triglycerides", "165", "mg/dL", "< 150", None, 150, "", H),
                ),
            ),
        ),
        (
            Text(("Complete Blood Count",)),
            Table(
                "aligned",
                (
                    Lab("WBC", "6.2", "x10^3/uL", "4.0-11.0", 4.0, 11.0, "", N),
                    Lab("Hemoglobin", "11.8", "g/dL", "12.0-15.5", 12.0, 15.5, "L", L),
                    Lab("Platelets", "1,250", "K/uL", "150-450", 150, 450, "HH", H),
                    Lab("Hemoglobin A1c", "6.1", "%", "4.0-5.6", 4.0, 5.6, "H", H),
                ),
                header=None,
            ),
            Items(
                "Diagnoses",
                (
                    (
                        "E11.9 Type 2 diabetes mellitus without complications",
                        Diagnosis(
                            name="Type 2 diabetes mellitus without complications", code="E11.9"
                        ),
                    ),
                    (
                        "Essential hypertension (I10)",
                        Diagnosis(name="Essential hypertension", code="I10"),
                    ),
                    ("- Iron deficiency anemia", Diagnosis(name="Iron deficiency anemia")),
                ),
            ),
            Text(
                ("Comments:", "Repeat lipid panel in 6 months. Fasting 12 hours before the draw.")
            ),
        ),
    ),
)

WELLNESS_COLON = Report(
    name="wellness_colon",
    record_id="sample-wellness-colon",
    user_id="demo-user",
    title="Harbor Health Lab (synthetic) - Wellness Screen",
    pages=(
        (
            Table(
                "colon",
                (
                    Lab("Glucose", "92", "mg/dL", "70-99", 70, 99, "", N),
                    Lab("HbA1c", "5.9", "%", "< 5.7", None, 5.7, "", H),
                    Lab("Vitamin D, 25-OH", "18", "ng/mL", "30-100", 30, 100, "L", L),
                    Lab("Vitamin B12", "620", "pg/mL", "200-900", 200, 900, "", N),
                    Lab("Ferritin", "150", "ng/mL", "15-150", 15, 150, "", N),
                    Lab("CRP", "<0.5", "mg/L", "< 5.0", None, 5.0, "", N),
                    Lab("Homocysteine", "16.2", "umol/L", "5.0-15.0", 5.0, 15.0, "High", H),
                ),
            ),
        ),
        (
            Items(
                "Procedures",
                (
                    ("Colonoscopy - 2023-04-12", Procedure(name="Colonoscopy", date="2023-04-12")),
                    (
                        "2022-11-03 Echocardiogram",
                        Procedure(name="Echocardiogram", date="2022-11-03"),
                    ),
                    (
                        "Knee arthroscopy (March 2015)",
                        Procedure(name="Knee arthroscopy", date="March 2015"),
                    ),
                ),
            ),
            Items(
                "Assessment",
                (
                    ("1. Prediabetes (R73.03)", Diagnosis(name="Prediabetes", code="R73.03")),
                    (
                        "2. Vitamin D deficiency - E55.9",
                        Diagnosis(name="Vitamin D deficiency", code="E55.9"),
                    ),
                ),
            ),
        ),
    ),
)

THYROID_PIPE = Report(
    name="thyroid_pipe",
    record_id="sample-thyroid-pipe",
    user_id="demo-user",
    title="Lakeside Reference Lab (synthetic) - Thyroid and Iron",
    pages=(
        (
            Text(("Thyroid Panel",)),
            Table(
                "pipe",
                (
                    Lab("TSH", "5.8", "mIU/L", "0.4-4.0", 0.4, 4.0, "H", H),
                    Lab("Free T4", "0.7", "ng/dL", "0.8-1.8", 0.8, 1.8, "L", L),
                    Lab("Free T3", "3.1", "pg/mL", "2.3-4.2", 2.3, 4.2, "", N),
                ),
                header=("Test", "Result", "Unit", "Reference Range", "Flag"),
            ),
            Text(("Iron Studies",)),
            Table(
                "pipe",
                (
                    Lab("Iron", "45", "ug/dL", "60-170", 60, 170, "", L),
                    Lab("TIBC", "410", "ug/dL", "250-450", 250, 450, "", N),
                    Lab("Ferritin", "9", "ng/mL", "15-150", 15, 150, "L", L),
                    Lab("HIV 1/2 Ab", "Non-reactive", "", "Non-reactive", None, None, "", N),
                ),
                header=("Analyte", "Value", "Units", "Normal Range", "Flag"),
            ),
        ),
        (
            Items(
                "Genetic Results",
                (
                    (
                        "MTHFR c.677C>T - heterozygous",
                        GeneticFinding(
                            gene="MTHFR", variant="c.677C>T", interpretation="heterozygous"
                        ),
                    ),
                    (
                        "HFE C282Y: not detected",
                        GeneticFinding(gene="HFE", variant="C282Y", interpretation="not detected"),
                    ),
                ),
            ),
            GeneTable(
                (GeneticFinding(gene="APOE", variant="e3/e4", interpretation="one e4 allele"),),
            ),
        ),
    ),
)

FOLLOWUP_MIXED = Report(
    name="followup_mixed",
    record_id="sample-followup-mixed",
    user_id="demo-user",
    title="St Elsewhere Pathology (synthetic) - Diabetes Follow-up",
    pages=(
        (
            Text(("Glycaemic control",)),
            Table(
                "spaces",
                (
                    Lab("Glycated haemoglobin", "53", "mmol/mol", "20-41", 20, 41, "H", H),
                    Lab("HbA1c", "7.0", "%", "4.0-5.6", 4.0, 5.6, "High", H),
                    Lab("A1C", "6.8", "%", "4.0-5.6", 4.0, 5.6, "", H),
                    Lab("Haemoglobin", "13.9", "g/dL", "12.0-15.5", 12.0, 15.5, "", N),
                    Lab("Triglyceride", "98", "mg/dL", "< 150", None, 150, "", N),
                    Lab("Cholestrol total", "188", "mg/dL", "< 200", None, 200, "", N),
                    Lab("Omega-3 Index", "3.9", "%", "> 8.0", 8.0, None, "Low", L),
                ),
                header=None,
            ),
            Items(
                "Surgical History:",
                (("Appendectomy, 12/06/2009", Procedure(name="Appendectomy", date="12/06/2009")),),
            ),
        ),
        (
            Items(
                "Genomic findings",
                (
                    (
                        "CYP2C19 *1/*2 - intermediate metabolizer",
                        GeneticFinding(
                            gene="CYP2C19",
                            variant="*1/*2",
                            interpretation="intermediate metabolizer",
                        ),
                    ),
                ),
            ),
            Items(
                "Problem List",
                (
                    (
                        "Type 2 diabetes mellitus - E11.9",
                        Diagnosis(name="Type 2 diabetes mellitus", code="E11.9"),
                    ),
                    ("Hyperlipidemia E78.5", Diagnosis(name="Hyperlipidemia", code="E78.5")),
                ),
            ),
        ),
    ),
)

GOOD_REPORTS = (ANNUAL_PANEL, WELLNESS_COLON, THYROID_PIPE, FOLLOWUP_MIXED)
BROKEN_NAME = "scan_no_text"
BROKEN_RECORD_ID = "sample-scan-no-text"
