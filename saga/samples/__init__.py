"""Synthetic lab reports that ship with saga, for ``saga demo`` and tests.

Every name and value in them is made up. Each good sample has a
``<name>.expected.json`` next to it: the exact ``Extraction`` the rules extractor
finds. ``scan_no_text`` is a PDF without a text layer: the router refuses it
(``InvalidInputError``), so the demo shows a dead letter. The files are written
by ``tests/steps/make_samples.py``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import msgspec

from saga.steps.models import Extraction

__all__ = ["Sample", "list_samples", "load_expected"]

DEMO_USER = "demo-user"
_BROKEN = {"scan_no_text": "router"}


class Sample(msgspec.Struct, frozen=True, kw_only=True):
    """One sample document and the saga ids the demo starts it under."""

    name: str
    path: Path
    record_id: str
    user_id: str
    expected_path: Path | None
    """The expected extraction, or None for a sample that must fail."""
    fails_at: str = ""
    """The step at which the sample dead-letters ("" when it completes)."""


def _folder() -> Path:
    # a regular install (wheel or editable) unpacks package data onto disk
    return Path(str(files(__name__)))


def list_samples() -> list[Sample]:
    """Every shipped sample, sorted by name."""
    samples = []
    for pdf in sorted(_folder().glob("*.pdf")):
        name = pdf.stem
        expected = pdf.with_name(f"{name}.expected.json")
        samples.append(
            Sample(
                name=name,
                path=pdf,
                record_id=f"sample-{name.replace('_', '-')}",
                user_id=DEMO_USER,
                expected_path=expected if expected.is_file() else None,
                fails_at=_BROKEN.get(name, ""),
            )
        )
    return samples


def load_expected(sample: Sample) -> Extraction | None:
    """The extraction ``sample`` must yield, or None when it must fail."""
    if sample.expected_path is None:
        return None
    return msgspec.json.decode(sample.expected_path.read_bytes(), type=Extraction)
