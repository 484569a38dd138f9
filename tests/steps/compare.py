"""Comparing extractions on what a layout's data states, without what vetting adds."""

from __future__ import annotations

from msgspec.structs import replace

from saga.steps.models import Biomarker, Extraction


def core_biomarker(found: Biomarker) -> Biomarker:
    """``found`` without provenance, canonical name, LOINC and warnings."""
    return replace(found, provenance=None, canonical_name="", loinc="", warnings=[])


def core(extraction: Extraction) -> Extraction:
    """The results as the data states them: no provenance, rejections or coverage."""
    return Extraction(
        biomarkers=[core_biomarker(found) for found in extraction.biomarkers],
        diagnoses=extraction.diagnoses,
        procedures=extraction.procedures,
        genetics=extraction.genetics,
    )
