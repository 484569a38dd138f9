"""Write the sample lab reports that ship in ``saga/samples`` (synthetic data only).

    .venv/bin/python -m tests.steps.make_samples [OUTPUT_DIR]

For every report in ``tests.steps.sample_reports`` it writes ``<name>.pdf`` and
``<name>.expected.json``: the exact Extraction the parser yields with the rules
extractor (results with provenance, canonical names, coverage). It refuses to
write one whose results differ from what the report's data states.
It also writes ``scan_no_text.pdf``: a "scanned" page with no text layer, which
the router refuses, so the demo shows a dead letter. The test suite regenerates
everything into a temporary folder and checks it still extracts as expected.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
from fpdf import FPDF

from saga.steps.extract_rules import extract_rules
from saga.steps.models import Extraction
from saga.steps.pages import pdf_pages
from saga.steps.parser import settle
from tests.steps.compare import core
from tests.steps.pdfgen import FIXED_DATE, Report, expected_extraction, render
from tests.steps.sample_reports import BROKEN_NAME, GOOD_REPORTS

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "saga" / "samples"


def scanned_page_pdf() -> bytes:
    """Two pages of grey bars where text would be: a scan without OCR."""
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    for _ in range(2):
        pdf.add_page()
        pdf.set_fill_color(90, 90, 90)
        for row in range(30):
            width = 60 + (row * 37) % 110
            pdf.rect(15, 20 + row * 8, width, 3, style="F")
    return bytes(pdf.output())


def parsed(report: Report, content: bytes) -> Extraction:
    """What the parser makes of ``content`` (the rendered ``report``), checked against its data."""
    pages = pdf_pages(content, max_pages=50)
    extraction = settle(extract_rules(pages), pages)
    if core(extraction) != expected_extraction(report):
        raise ValueError(f"{report.name} does not extract to what its data states")
    return extraction


def write_samples(directory: Path) -> list[Path]:
    """Write every sample PDF and expected JSON into ``directory``; return the PDFs."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for report in GOOD_REPORTS:
        pdf = directory / f"{report.name}.pdf"
        pdf.write_bytes(render(report))
        expected = msgspec.json.format(msgspec.json.encode(parsed(report, pdf.read_bytes())))
        (directory / f"{report.name}.expected.json").write_bytes(expected + b"\n")
        written.append(pdf)
    broken = directory / f"{BROKEN_NAME}.pdf"
    broken.write_bytes(scanned_page_pdf())
    written.append(broken)
    return written


def main(argv: list[str]) -> int:
    directory = Path(argv[1]) if len(argv) > 1 else DEFAULT_DIR
    for path in write_samples(directory):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
