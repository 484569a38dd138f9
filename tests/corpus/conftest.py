"""The corpus, drawn once per test session into a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus.build import build
from tests.corpus.fonts import FontsMissing


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every layout's PDF and truth file; a missing system font fails with what to install."""
    directory = tmp_path_factory.mktemp("corpus")
    try:
        build(directory)
    except FontsMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    return directory
