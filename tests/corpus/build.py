"""Write the corpus: ``<layout>.pdf`` and ``<layout>.truth.json`` for every layout.

    python -m tests.corpus.build DIR [LAYOUT ...]
    python -m tests.corpus.build DIR --scans     # the scanned corpus too (OCR)
    saga eval DIR

Output is deterministic (fixed dates and seeds): the same bytes on every run.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from saga.evaluation.truth import TRUTH_SUFFIX, dump_truth
from tests.corpus.catalog import LAYOUTS, SCANNED
from tests.corpus.fonts import FontsMissing


def build(directory: Path, only: Sequence[str] = (), *, scans: bool = False) -> list[Path]:
    """Draw every layout (or those named in ``only``) into ``directory``; return the PDFs."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for layout in LAYOUTS + (SCANNED if scans else ()):
        if only and layout.__name__ not in only:
            continue
        pdf, truth = layout()
        path = directory / truth.document
        path.write_bytes(pdf)
        (directory / f"{truth.layout}{TRUTH_SUFFIX}").write_bytes(dump_truth(truth))
        written.append(path)
    return written


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__.strip())
        return 0 if argv else 2
    scans = "--scans" in argv
    argv = [arg for arg in argv if arg != "--scans"]
    names = {layout.__name__ for layout in LAYOUTS + SCANNED}
    unknown = [name for name in argv[1:] if name not in names]
    if unknown:
        print(f"unknown layout {unknown[0]!r}; known: {', '.join(sorted(names))}", file=sys.stderr)
        return 2
    try:
        written = build(
            Path(argv[0]),
            argv[1:],
            scans=scans or bool(set(argv[1:]) - {layout.__name__ for layout in LAYOUTS}),
        )
    except FontsMissing as exc:
        print(f"corpus: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} documents with their truth to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
