"""Write deploy/helm/saga/README.md from the chart's values.yaml comments (helm-docs style).

The comment lines right above a key are its description. A map whose keys carry
comments of their own is listed key by key; any other value is one row with its
default. Run from anywhere:

    python deploy/helm/chart_readme.py           # rewrite the README
    python deploy/helm/chart_readme.py --check   # exit 1 if it is out of date

tests/deploy/test_chart_readme.py runs the check.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "saga"
README = CHART / "README.md"
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):(\s|$)")

INTRO = """\
Step executors of the saga runner on Kubernetes: one Deployment per pipeline
step (`saga worker <step>`), autoscaled by KEDA on consumer-group lag down to
zero, an always-on controller (`saga controller`) that keeps scale-to-zero
safe, a `saga init` hook and a `helm test` pod. The chart holds no credential:
Redis is reached through a Secret you create.

```bash
helm install saga deploy/helm/saga -n saga -f deploy/helm/saga/examples/small.yaml
helm test saga -n saga        # saga controller --check against the release's Redis
```

`deploy/README.md` in the repository explains what runs where, each group of
values, scaling, Redis settings and the runbooks. This file is generated from
the comments in `values.yaml` by `deploy/helm/chart_readme.py`; edit those.
"""


def comments(lines: list[str]) -> dict[tuple[str, ...], str]:
    """Key path -> the comment block right above the key (keys inside lists skipped)."""
    found: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    block: list[str] = []
    list_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        if list_indent is not None and (not stripped or indent > list_indent):
            block = []
            continue
        list_indent = None
        match = _KEY.match(line)
        if stripped.startswith("- "):
            list_indent = indent
        elif match:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = (*[k for _, k in stack], match.group(2))
            stack.append((indent, match.group(2)))
            if block:
                found[path] = " ".join(block)
        block = []
    return found


def rows(values: dict[str, Any], docs: dict[tuple[str, ...], str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, value in node.items():
            here = (*path, key)
            documented_children = isinstance(value, dict) and any(
                p[: len(here)] == here and len(p) > len(here) for p in docs
            )
            if documented_children:
                if here in docs:
                    out.append((".".join(here), "object", "", docs[here]))
                walk(value, here)
            else:
                out.append((".".join(here), _type(value), _default(value), docs.get(here, "")))

    walk(values, ())
    return out


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list"}.get(
        type(value), "object"
    )


def _markdown(text: str) -> str:
    """Table-safe text: pipes escaped, <words> outside `code` kept from reading as HTML."""
    parts = text.replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):  # even parts are outside backticks
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _default(value: Any) -> str:
    return "`" + json.dumps(value, separators=(",", ":")).replace("|", "\\|") + "`"


def render() -> str:
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    table = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for key, kind, default, doc in rows(values, comments(text.splitlines())):
        cells = (key, kind, default, _markdown(doc))
        table.append("| " + " | ".join(cells) + " |")
    head = (
        f"# {chart['name']}\n\n"
        f"Version: {chart['version']} · Type: {chart['type']} · "
        f"AppVersion: {chart['appVersion']} · Kubernetes: `{chart['kubeVersion']}`\n\n"
    )
    return head + INTRO + "\n## Values\n\n" + "\n".join(table) + "\n"


def main(argv: list[str]) -> int:
    wanted = render()
    if "--check" in argv:
        if not README.exists() or README.read_text() != wanted:
            print(
                f"{README} is out of date: run python deploy/helm/chart_readme.py", file=sys.stderr
            )
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
