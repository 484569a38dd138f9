"""Every corpus layout, by name: a function that draws the PDF and returns it with its truth."""

from __future__ import annotations

from collections.abc import Callable

from saga.evaluation.truth import ExpectedDocument
from tests.corpus import layouts_rows

Layout = Callable[[], tuple[bytes, ExpectedDocument]]

LAYOUTS: tuple[Layout, ...] = (
    layouts_rows.unit_after_range,
    layouts_rows.paren_flags,
    layouts_rows.censored_qualitative,
)
