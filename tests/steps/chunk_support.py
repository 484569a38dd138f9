"""A model that reads its request for the chunk tests (steps and workers): every
``Name  value unit`` row on the page of the marker above it, and one diagnosis that every
request repeats (a duplicate across chunks)."""

from __future__ import annotations

import json
import re

ROW = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9 ]+?)  (?P<value>\d+(?:\.\d+)?) (?P<unit>\S+)", re.M)
MARK = re.compile(r"^=== page (\d+)", re.M)


def answer_json(text: str) -> str:
    """The model's answer (JSON) to a request whose user message is ``text``."""
    found = []
    for block in re.split(r"(?m)^(?==== page )", text):
        page = MARK.match(block)
        for row in ROW.finditer(block):
            found.append(
                {
                    "name": row["name"],
                    "value": float(row["value"]),
                    "value_text": row["value"],
                    "unit": row["unit"],
                    "page": int(page[1]) if page else 1,
                    "line": row.group(0),
                }
            )
    diagnoses = [{"name": "Type 2 diabetes", "code": "E11.9"}]
    return json.dumps({"biomarkers": found, "diagnoses": diagnoses})


def row_pages(n: int, per_page: int = 12) -> list[list[str]]:
    """``n`` pages of ``per_page`` rows, each row's name and value its own."""
    return [
        [f"Analyte {chr(65 + p)}{r}  {p * 10 + r}.5 mg/dL  1-99" for r in range(per_page)]
        for p in range(n)
    ]
