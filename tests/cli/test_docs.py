"""The README and runbooks agree with the code: every setting is in the README's
configuration table, every `saga …` command they show parses, and destructive ones
carry their confirmation."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from saga.cli.main import COMMANDS, build_parser
from saga.config.settings import SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "deploy" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# load_settings and the modules it reads the step overrides and Redis checks with
SETTINGS_SOURCE = "".join(p.read_text() for p in sorted((ROOT / "saga" / "config").glob("*.py")))
VARIABLES = sorted(set(re.findall(r'"((?:SAGA|OTEL|REDIS)_[A-Z0-9_]+)"', SETTINGS_SOURCE)))


def configuration_table() -> set[str]:
    """Variable names in the README's configuration table (``_X`` continues the name
    before it: `SAGA_BREAKER_FAILURES`, `_WINDOW` is SAGA_BREAKER_WINDOW)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        cell = line.split("|")[1] if line.startswith("|") else ""
        last = ""
        for code in re.findall(r"`([A-Z_<>]+)`", cell):
            name = last.rsplit("_", 1)[0] + code if code.startswith("_") and last else code
            names.add(name)
            last = name
    return names


def test_every_setting_is_in_the_readme_table() -> None:
    """Each variable saga/config/*.py reads has a row in the README's table."""
    assert len(VARIABLES) > 30
    missing = [v for v in VARIABLES if v not in configuration_table()]
    assert not missing


@pytest.mark.parametrize("name", [v for v in VARIABLES if v.startswith("SAGA_")])
def test_a_setting_is_never_taken_for_a_step_override(name: str) -> None:
    """No setting of its own (SAGA_LLM_TIMEOUT) turns into a step's override (`llm`)."""
    # the first value it accepts (the fetch policy's lists take a URL or a network)
    key = "A" * 43 + "="  # 32 bytes in base64: SAGA_DATA_KEY
    candidates = (
        "0.5",
        "5",
        "json",
        "rules",
        "auto",
        "https://records.example/",
        "10.0.0.0/8",
        "local",
    )
    for value in (*candidates, key, f"k1:{key}"):  # f"k1:{key}": SAGA_DATA_KEYS
        try:
            settings = load_settings({name: value})
        except SettingsError:
            continue
        assert settings.steps == {}
        return
    raise AssertionError(f"no test value fits {name}")


def documented_commands() -> list[tuple[str, str, bool]]:
    """(file, command, whole) for every `saga …` line in a code block (whole: a full
    invocation) and every inline span (prose may leave out arguments); placeholders made
    concrete, shell pipes and redirections cut off, syntax summaries ([..], a|b, …) skipped."""
    found = []
    for path in DOCS:
        text = path.read_text()
        lines = [m.group(1) for m in re.finditer(r"^(?:\$ )?(saga [^\n]*)$", text, re.M)]
        spans = re.findall(r"`(saga [a-z][^`\n]*)`", text)
        for raw, whole in [(c, True) for c in lines] + [(c, False) for c in spans]:
            cmd = re.split(r"\s{2,}#|\s+#\s|\s[|>]\s", raw)[0].strip()
            if re.search(r"[\[|…]|\.\.\.|\{", cmd) or cmd.split()[1] not in COMMANDS:
                continue  # a summary, or output such as "saga mr-1 started"
            cmd = re.sub(r"(?<= )[A-Z](?= |$)", "1", re.sub(r"<[^>]+>", "x", cmd))
            found.append((path.relative_to(ROOT).as_posix(), cmd, whole))
    return found


def test_documented_commands_parse() -> None:
    """Every saga command a code block shows is accepted by the real argument parser, and
    every option an inline mention names exists."""
    commands = documented_commands()
    assert len(commands) > 40
    parser = build_parser()
    bad = []
    for where, cmd, whole in commands:
        argv = shlex.split(cmd)[1:]
        if not whole:
            if parser._command(argv).unknown_options(argv):  # type: ignore[attr-defined]
                bad.append(f"{where}: {cmd}")
            continue
        try:
            parser.parse_args(argv)
        except SystemExit:
            bad.append(f"{where}: {cmd}")
    assert not bad


def test_documented_purges_confirm() -> None:
    """`saga dlq purge` is always shown with --yes (without it the command refuses)."""
    purges = [(w, c) for w, c, _ in documented_commands() if c.startswith("saga dlq purge")]
    assert purges
    assert [(w, c) for w, c in purges if "--yes" not in c.split()] == []
