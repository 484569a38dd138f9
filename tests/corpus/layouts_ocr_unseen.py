"""Held-out layouts through the scanner: what OCR reads of layouts nobody tuned it on.

The unseen layouts (``layouts_unseen_us``, ``layouts_unseen_world``) were written to
test the parser on layouts it was not taught; here they are scanned and faxed as the
seen ones are (``layouts_ocr``), and reported apart by ``saga eval`` (scan class
``unseen <device>``), outside the recall gates: they say whether what was measured on
the seen layouts holds on others.
"""

from __future__ import annotations

from tests.corpus import layouts_unseen_us, layouts_unseen_world
from tests.corpus.layouts_ocr import Built, Source, _scanned
from tests.corpus.scanner import FAX_FINE, FAX_STANDARD, SCAN_200, SCAN_300, Device


def _unseen(source: Source, device: Device, name: str, seed: int) -> Built:
    return _scanned(source, device, name=name, seed=seed, scan=f"unseen {device.kind}")


def unseen_scan300_reference_codes() -> Built:
    return _unseen(layouts_unseen_us.reference_lab_codes, SCAN_300, "unseen_scan300_codes", 31)


def unseen_scan200_word_ranges() -> Built:
    return _unseen(layouts_unseen_us.clinic_word_ranges, SCAN_200, "unseen_scan200_words", 32)


def unseen_scan200_spanish() -> Built:
    return _unseen(layouts_unseen_world.spanish_hospital, SCAN_200, "unseen_scan200_spanish", 33)


def unseen_scan200_dutch() -> Built:
    return _unseen(layouts_unseen_world.dutch_lab, SCAN_200, "unseen_scan200_dutch", 34)


def unseen_scan200_categories() -> Built:
    return _unseen(
        layouts_unseen_us.lab_chain_categories, SCAN_200, "unseen_scan200_categories", 35
    )


def unseen_fax_fine_swedish() -> Built:
    return _unseen(layouts_unseen_world.swedish_lab, FAX_FINE, "unseen_fax_fine_swedish", 36)


def unseen_fax_fine_vet() -> Built:
    return _unseen(layouts_unseen_us.vet_chemistry, FAX_FINE, "unseen_fax_fine_vet", 37)


def unseen_fax_fine_brazilian() -> Built:
    return _unseen(layouts_unseen_world.brazilian_lab, FAX_FINE, "unseen_fax_fine_brazil", 38)


def unseen_fax_standard_italian() -> Built:
    return _unseen(
        layouts_unseen_world.italian_referto, FAX_STANDARD, "unseen_fax_standard_italian", 39
    )


def unseen_fax_standard_cumulative() -> Built:
    return _unseen(layouts_unseen_us.cumulative_au, FAX_STANDARD, "unseen_fax_standard_cumul", 40)


UNSEEN_SCANNED = (
    unseen_scan300_reference_codes,
    unseen_scan200_word_ranges,
    unseen_scan200_spanish,
    unseen_scan200_dutch,
    unseen_scan200_categories,
    unseen_fax_fine_swedish,
    unseen_fax_fine_vet,
    unseen_fax_fine_brazilian,
    unseen_fax_standard_italian,
    unseen_fax_standard_cumulative,
)
