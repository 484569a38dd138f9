"""The summary-to-table script of docs/reliability.md."""

from __future__ import annotations

import json

from tests.faults.report import merged, table


def test_rows_of_one_fault_are_added_up_and_recovery_is_the_longest() -> None:
    """Two waves of the soak make one row: counts summed, recovery the maximum."""
    lines = [
        json.dumps({"fault": "soak", "sagas": 10, "faults": 1, "lost": 0, "recovery_s": 2.5}),
        json.dumps({"fault": "soak", "sagas": 5, "faults": 2, "stuck": 1, "recovery_s": 1.0}),
        json.dumps({"fault": "kill9", "sagas": 3, "double_commits": 1, "recovery_s": 0.4}),
    ]
    text = table(merged(lines))
    assert "| soak | 15 | 3 | 0 | 0 | 0 | 0 | 1 | 0 | 2.5 |" in text
    assert "| kill9 | 3 | 0 | 0 | 1 |" in text
    assert text.splitlines()[0].startswith("| fault | sagas | faults injected | lost |")
