"""The docs never show a bulk action as if it acted at once: `saga dlq replay` and
`saga retry --step S` without a record are dry runs unless given `--yes`, so every
example of them in README.md, docs/ and deploy/README.md has `--yes` or `--dry-run`,
or says beside it (the line or the output below) that it is a dry run."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BULK = re.compile(r"saga (dlq replay|retry)((?: +--?[a-z][a-z-]*(?: +[^\s`|#'\"-][^\s`|#'\"]*)?)*)")
SAID = re.compile(r"dry.run|would (?:retry|replay)", re.IGNORECASE)


def bulk_examples_without_confirmation(text: str) -> list[str]:
    """``<line number>: <command>`` of each bulk example with nothing that says what it does."""
    lines = text.splitlines()
    found = []
    for n, line in enumerate(lines):
        for m in BULK.finditer(line):
            verb, args = m.group(1), m.group(2).split()
            if not args or "--json" in args:  # no example; the JSON says dry_run itself
                continue
            if verb == "retry" and "--step" not in args:
                continue  # a record's retry (its id comes first) is not a bulk action
            if "--yes" in args or "--dry-run" in args or SAID.search(" ".join(lines[n : n + 5])):
                continue
            found.append(f"{n + 1}: {m.group(0)}")
    return found


def test_no_doc_shows_a_bulk_action_without_yes_or_a_dry_run() -> None:
    """Every bulk replay or retry example shows --yes, --dry-run or its dry run's output."""
    docs = [
        REPO / "README.md",
        REPO / "deploy" / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
    ]
    stale = {
        d.name: bad for d in docs if (bad := bulk_examples_without_confirmation(d.read_text()))
    }
    assert stale == {}


def test_the_check_finds_a_stale_example() -> None:
    """The operations guide's old sentence is found; its fixed form and a record's retry are not."""
    old = "widen the policy, then `saga dlq replay --step router`.\n"
    assert bulk_examples_without_confirmation(old) == ["1: saga dlq replay --step router"]
    fixed = "then `saga dlq replay --step router --yes`; `saga retry mr-1 --step parser`"
    assert bulk_examples_without_confirmation(fixed) == []
