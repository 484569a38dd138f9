"""Scanned and faxed versions of text layouts: what OCR must read (``saga eval`` reports
them apart, by ``ExpectedDocument.scan``).

Each is a text layout of this corpus put through a device of ``scanner``: the same
truth, every page (or, in the mixed document, some pages) now a picture. Two are
not documents at all: a blank scanned page and a photo, which must be refused or
flagged with one sentence.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec.structs import replace

from saga.evaluation.truth import ExpectedDocument
from tests.corpus import layouts_german, layouts_us, layouts_world
from tests.corpus.scanner import (
    FAX_FINE,
    FAX_STANDARD,
    SCAN_200,
    SCAN_300,
    Device,
    blank_page,
    image_pdf,
    photo,
    render,
    rotate_page,
    spoil,
    stamp,
    still,
    tiff,
)

Built = tuple[bytes, ExpectedDocument]
Source = Callable[[], Built]


def _scanned(
    source: Source,
    device: Device,
    *,
    name: str,
    suffix: str = "pdf",
    seed: int = 1,
    keep_text: tuple[int, ...] = (),
    scan: str = "",
) -> Built:
    """``source`` through ``device``: an image-only PDF (or a TIFF), the same results."""
    pdf, truth = source()
    pictures = [spoil(page, device, seed=seed + i) for i, page in enumerate(render(pdf, device))]
    if suffix == "tiff":
        content = tiff(pictures, device)
    else:
        content = image_pdf(
            [None if i + 1 in keep_text else p for i, p in enumerate(pictures)], device, pdf
        )
    images = [n for n in range(1, truth.page_count + 1) if n not in keep_text]
    return content, _truth(truth, name, suffix, scan or device.kind, images, device)


def _truth(
    truth: ExpectedDocument, name: str, suffix: str, scan: str, images: list[int], device: Device
) -> ExpectedDocument:
    return replace(
        truth,
        layout=name,
        document=f"{name}.{suffix}",
        description=f"{truth.layout} as a {scan} ({device.dpi[0]}x{device.dpi[1]} dpi"
        f"{', 1-bit' if device.bilevel else ''})",
        image_pages=images,
        expect_review=False,
        scan=scan,
    )


def scan300_quest() -> Built:
    return _scanned(layouts_us.quest_style, SCAN_300, name="scan300_quest")


def scan300_german() -> Built:
    return _scanned(layouts_german.german_befund, SCAN_300, name="scan300_german", seed=3)


def scan200_quest() -> Built:
    return _scanned(layouts_us.quest_style, SCAN_200, name="scan200_quest", seed=5)


def scan200_nhs() -> Built:
    return _scanned(layouts_world.nhs_uk, SCAN_200, name="scan200_nhs", seed=6)


def scan200_labcorp() -> Built:
    return _scanned(layouts_us.labcorp_style, SCAN_200, name="scan200_labcorp", seed=7)


def fax_fine_quest() -> Built:
    return _scanned(layouts_us.quest_style, FAX_FINE, name="fax_fine_quest", seed=8)


def fax_fine_german() -> Built:
    return _scanned(layouts_german.german_befund, FAX_FINE, name="fax_fine_german", seed=9)


def fax_standard_quest_tiff() -> Built:
    """A fax server's multi-page TIFF (CCITT G4, 200x100 dpi)."""
    return _scanned(
        layouts_us.quest_style, FAX_STANDARD, name="fax_standard_quest", suffix="tiff", seed=10
    )


def fax_standard_nhs() -> Built:
    return _scanned(layouts_world.nhs_uk, FAX_STANDARD, name="fax_standard_nhs", seed=11)


def stamped_nhs() -> Built:
    """A "RECEIVED" stamp and a pen stroke across the result column."""
    pdf, truth = layouts_world.nhs_uk()
    pages = render(pdf, SCAN_200)
    pages[0] = stamp(pages[0], x_mm=100, y_mm=120, dpi=SCAN_200.dpi[0], seed=4)
    pictures = [spoil(page, SCAN_200, seed=12 + i) for i, page in enumerate(pages)]
    images = list(range(1, truth.page_count + 1))
    return image_pdf(pictures, SCAN_200), _truth(
        truth, "stamped_nhs", "pdf", "stamp", images, SCAN_200
    )


def rotated_labcorp() -> Built:
    """Page 1 fed sideways: stored a quarter turn from upright."""
    pdf, truth = layouts_us.labcorp_style()
    pictures = [spoil(page, SCAN_300, seed=14 + i) for i, page in enumerate(render(pdf, SCAN_300))]
    pictures[0] = rotate_page(pictures[0])
    images = list(range(1, truth.page_count + 1))
    return image_pdf(pictures, SCAN_300), _truth(
        truth, "rotated_labcorp", "pdf", "rotated", images, SCAN_300
    )


def mixed_quest() -> Built:
    """Page 1 with its text layer, page 2 a 200 dpi scan."""
    return _scanned(
        layouts_us.quest_style, SCAN_200, name="mixed_quest", seed=15, keep_text=(1,), scan="mixed"
    )


def png_german() -> Built:
    """One page photographed flat and saved as a PNG (300 dpi grey)."""
    pdf, truth = layouts_german.german_kurzbefund()
    page = spoil(render(pdf, SCAN_300)[0], SCAN_300, seed=16)
    first = [r for r in truth.results if r.page == 1]
    truth = replace(truth, results=first, page_count=1)
    return still(page, fmt="PNG", dpi=SCAN_300.dpi), _truth(
        truth, "png_german", "png", "scan-300", [1], SCAN_300
    )


def blank_scan() -> Built:
    """A scanned blank page: nothing to read, and that must be said."""
    content = image_pdf([blank_page(SCAN_200, seed=17)], SCAN_200)
    truth = ExpectedDocument(
        layout="blank_scan",
        document="blank_scan.pdf",
        description="a scanned blank page",
        results=[],
        page_count=1,
        expect_review=True,
        image_pages=[1],
        scan="refuse",
    )
    return content, truth


def photo_jpeg() -> Built:
    """A phone photo of no document at all."""
    truth = ExpectedDocument(
        layout="photo_jpeg",
        document="photo_jpeg.jpg",
        description="a JPEG photo of no document",
        results=[],
        page_count=1,
        expect_review=True,
        image_pages=[1],
        scan="refuse",
    )
    return still(photo(seed=18), fmt="JPEG"), truth


SCANNED = (
    scan300_quest,
    scan300_german,
    scan200_quest,
    scan200_nhs,
    scan200_labcorp,
    fax_fine_quest,
    fax_fine_german,
    fax_standard_quest_tiff,
    fax_standard_nhs,
    stamped_nhs,
    rotated_labcorp,
    mixed_quest,
    png_german,
    blank_scan,
    photo_jpeg,
)
