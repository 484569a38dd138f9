"""deploy/README.md's numbered sections count 1, 2, 3 … with no number twice or skipped
(other docs cite them as "deploy/README.md §8")."""

from __future__ import annotations

import re

from tests.deploy.chart import REPO


def test_numbered_sections_count_up_by_one() -> None:
    """The "## N." headings, in order, are 1..N."""
    text = (REPO / "deploy" / "README.md").read_text()
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", text, flags=re.M)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
