"""The skip every OCR test shares: Tesseract and the language data it reads must be
installed (``./dev test`` installs them as root); the reason is why they are not."""

from __future__ import annotations

import pytest

from saga.steps.ocr_engine import available


def needs_tesseract(languages: str = "eng") -> pytest.MarkDecorator:
    why = available(languages)
    return pytest.mark.skipif(bool(why), reason=why or "Tesseract is installed")
