"""The corpus itself is sound: its truth is what the pages print, and internally consistent.

These checks read the PDFs with pypdf's plain text mode, not with the extractor under test.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from pypdf import PdfReader

from saga.evaluation.truth import ExpectedDocument, ExpectedResult, find_truths, load_truth
from tests.corpus.build import build
from tests.corpus.catalog import LAYOUTS

SEEN_IN_ISSUE = {
    "unit_after_range",
    "paren_flags",
    "indian_lab_chain",
    "quest_style",
    "censored_qualitative",
    "german_befund",
    "german_kurzbefund",
    "two_column_blocks",
    "wrapped_names",
    "dot_leaders",
    "multipage_headers",
    "narrative_letter",
    "fax_scanned",
}
COMMA_DECIMALS = {
    "german_befund",
    "german_kurzbefund",
    "french_bilan",
    "spanish_hospital",
    "brazilian_lab",
    "swedish_lab",
    "dutch_lab",
    "italian_referto",
    "pipe_table",
    "semicolon_export",
    "two_tables_es",
}
_RANGE = re.compile(
    r"^(?:normal:\s*)?(?:(?P<low>[\d.,]+)\s*[-\u2013]\s*(?P<high>[\d.,]+)"
    r"|(?P<op><=|>=|<|>|\u2264|\u2265|> or =|< or =)\s*(?P<bound>[\d.,]+))$"
)


def _truths(directory: Path) -> list[ExpectedDocument]:
    return [load_truth(path) for path in find_truths(directory)]


def _page_texts(path: Path) -> list[str]:
    reader = PdfReader(io.BytesIO(path.read_bytes()))
    return [" ".join((page.extract_text() or "").split()) for page in reader.pages]


def _number(text: str, comma_decimals: bool) -> float:
    digits = text.lstrip("<>=\u2264\u2265 ")
    if comma_decimals:
        return float(digits.replace(".", "").replace(",", "."))
    return float(digits.replace(",", ""))


def _meaning(r: ExpectedResult, comma_decimals: bool) -> str | None:
    """high/low/normal from the printed range, or None when the range is not numeric."""
    m = _RANGE.match(r.reference.strip().lower())
    if m is None or r.value is None or r.comparator:
        return None
    value = r.value
    if m["low"]:
        low, high = _number(m["low"], comma_decimals), _number(m["high"], comma_decimals)
        return "low" if value < low else "high" if value > high else "normal"
    bound, op = _number(m["bound"], comma_decimals), m["op"]
    if op in {"<", "\u2264", "<=", "< or ="}:
        inside = value < bound if op == "<" else value <= bound
        return "normal" if inside else "high"
    inside = value > bound if op == ">" else value >= bound
    return "normal" if inside else "low"


def test_corpus_has_enough_layouts_and_every_case_seen(corpus_dir: Path) -> None:
    """At least 15 layouts, one truth file each, covering every layout the issue saw fail."""
    layouts = {truth.layout for truth in _truths(corpus_dir)}
    assert len(layouts) == len(LAYOUTS) >= 15
    assert layouts >= SEEN_IN_ISSUE


def test_every_result_is_printed_on_its_page(corpus_dir: Path) -> None:
    """Each result's name words, value and unit occur in its page's text; image pages have none."""
    for truth in _truths(corpus_dir):
        pages = _page_texts(corpus_dir / truth.document)
        assert len(pages) == truth.page_count
        for number, text in enumerate(pages, start=1):
            assert bool(text) is (number not in truth.image_pages), (truth.layout, number)
        for r in truth.results:
            if r.page in truth.image_pages:
                continue
            text = pages[r.page - 1]
            for word in r.name.split():
                assert word in text, (truth.layout, r.name, word)
            assert r.value_text in text, (truth.layout, r.name, r.value_text)
            assert r.unit in text, (truth.layout, r.name, r.unit)


def test_values_and_flags_are_consistent(corpus_dir: Path) -> None:
    """The typed number is what the printed value says; flags agree with the printed range."""
    for truth in _truths(corpus_dir):
        comma_decimals = truth.layout in COMMA_DECIMALS
        for r in truth.results:
            where = (truth.layout, r.name)
            if r.value is None:
                assert not r.comparator and not r.unit, where
                continue
            assert _number(r.value_text, comma_decimals) == r.value, where
            assert r.value_text.startswith(r.comparator), where
            meaning = _meaning(r, comma_decimals)
            if meaning is not None:
                assert r.flag == meaning, (*where, meaning)
            if r.flag_text:
                assert r.flag, where


def test_review_is_expected_exactly_where_pages_are_scans(corpus_dir: Path) -> None:
    """Documents with image-only pages expect review; the others do not."""
    for truth in _truths(corpus_dir):
        assert truth.expect_review is bool(truth.image_pages), truth.layout


@pytest.mark.parametrize("layout", ["german_befund", "fax_scanned"])
def test_build_is_deterministic(tmp_path: Path, corpus_dir: Path, layout: str) -> None:
    """Drawing a layout again gives the same bytes (fixed dates, seeds and fonts)."""
    build(tmp_path, [layout])
    for name in (f"{layout}.pdf", f"{layout}.truth.json"):
        assert (tmp_path / name).read_bytes() == (corpus_dir / name).read_bytes()
