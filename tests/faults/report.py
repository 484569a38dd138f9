"""Turns the fault suite's summary rows into docs/reliability.md's table.

    SAGA_FAULT_SUMMARY=/tmp/faults.jsonl pytest tests/faults
    python -m tests.faults.report /tmp/faults.jsonl

Rows of one test (the soak writes one per wave) are added up; recovery is the longest
("never": the sagas did not all end by the test's deadline).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = [
    ("fault", "fault"),
    ("sagas", "sagas"),
    ("faults", "faults injected"),
    ("lost", "lost"),
    ("double_commits", "double commits"),
    ("double_enqueues", "double enqueues"),
    ("double_charges", "double charges"),
    ("stuck", "stuck"),
    ("reclaimed", "steps reclaimed"),
    ("recovery_s", "recovery (s)"),
]


def merged(lines: list[str]) -> dict[str, dict[str, float | str]]:
    rows: dict[str, dict[str, float | str]] = {}
    for line in lines:
        if not line.strip():
            continue
        row = json.loads(line)
        name = row["fault"]
        if name not in rows:
            rows[name] = {k: row.get(k, 0) for k, _ in COLUMNS}
            continue
        into = rows[name]
        for key, _ in COLUMNS[1:]:
            value = float(row.get(key, 0))
            if key == "recovery_s":
                worst = min if min(float(into[key]), value) < 0 else max
                into[key] = worst(float(into[key]), value)
            else:
                into[key] = float(into[key]) + value
    return rows


def table(rows: dict[str, dict[str, float | str]]) -> str:
    out = ["| " + " | ".join(title for _, title in COLUMNS) + " |"]
    out.append("|" + "|".join("---" if k == "fault" else "--:" for k, _ in COLUMNS) + "|")
    for row in rows.values():
        cells = [str(row["fault"]).replace("_", " ")]
        for key, _ in COLUMNS[1:]:
            v = float(row[key])
            if key == "recovery_s":
                cells.append("never" if v < 0 else f"{v:.1f}")
            else:
                cells.append(f"{v:,.0f}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.faults.report SUMMARY.jsonl", file=sys.stderr)
        return 2
    print(table(merged(Path(argv[0]).read_text().splitlines())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
