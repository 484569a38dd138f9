"""Every corpus layout, by name: a function that draws the PDF and returns it with its truth."""

from __future__ import annotations

from collections.abc import Callable

from saga.evaluation.truth import ExpectedDocument
from tests.corpus import (
    layouts_columns,
    layouts_documents,
    layouts_german,
    layouts_ocr,
    layouts_ocr_unseen,
    layouts_pages,
    layouts_rows,
    layouts_scans,
    layouts_separators,
    layouts_unseen_us,
    layouts_unseen_world,
    layouts_us,
    layouts_world,
)

Layout = Callable[[], tuple[bytes, ExpectedDocument]]

LAYOUTS: tuple[Layout, ...] = (
    layouts_us.quest_style,
    layouts_us.labcorp_style,
    layouts_us.urinalysis,
    layouts_us.clinic_asterisk,
    layouts_rows.unit_after_range,
    layouts_rows.paren_flags,
    layouts_rows.censored_qualitative,
    layouts_rows.dot_leaders,
    layouts_rows.unit_in_name,
    layouts_pages.two_column_blocks,
    layouts_pages.two_column_summary,
    layouts_pages.wrapped_names,
    layouts_world.indian_lab_chain,
    layouts_german.german_befund,
    layouts_german.german_kurzbefund,
    layouts_world.nhs_uk,
    layouts_world.french_bilan,
    layouts_world.australian_range_first,
    layouts_documents.multipage_headers,
    layouts_documents.narrative_letter,
    layouts_documents.discharge_summary,
    layouts_scans.scanned_page_inside,
    layouts_scans.fax_scanned,
    layouts_unseen_world.spanish_hospital,
    layouts_unseen_world.brazilian_lab,
    layouts_unseen_world.swedish_lab,
    layouts_unseen_world.dutch_lab,
    layouts_unseen_world.italian_referto,
    layouts_unseen_us.clinic_word_ranges,
    layouts_unseen_us.reference_lab_codes,
    layouts_unseen_us.lab_chain_categories,
    layouts_unseen_us.cumulative_au,
    layouts_unseen_us.vet_chemistry,
    layouts_columns.offset_side_tables,
    layouts_columns.narrative_beside_results,
    layouts_columns.results_beside_history,
    layouts_columns.stacked_columns,
    layouts_separators.pipe_table,
    layouts_separators.semicolon_export,
    layouts_separators.unit_before_value,
    layouts_separators.two_tables_es,
)
SCANNED: tuple[Layout, ...] = layouts_ocr.SCANNED + layouts_ocr_unseen.UNSEEN_SCANNED
"""Scanned and faxed documents for OCR (``build DIR --scans``; ``SAGA_OCR=on saga eval``)."""
