#!/usr/bin/env python3
"""Issue 37's move of saga/'s top-level modules into packages, re-runnable on any main.

    python .move/arch_move.py --check   # dry run: what would move and be rewritten;
                                        # exit 1 if anything is left to do, 0 if none
    python .move/arch_move.py           # git mv each file, then rewrite references

The table below is the whole move (old path -> new path). A run moves every old path that
exists (`git mv`), adds the new packages' __init__.py, then rewrites every reference in
the tracked text files: dotted names in Python (imports, lazy imports in functions,
``"saga.x:attr"`` and monkeypatch strings, comments; not logger names) and in docs, and
paths (``saga/x.py``); the Helm chart's templates (their own "saga.settings" helper) are
left alone. ``from saga import review`` becomes ``from saga.documents import review``.
In Python code (outside strings and comments) a dotted name is rewritten only in import
statements, or in files that ``import saga.<moved>``, so a variable named ``saga``
(``saga.review``, a saga's field) is left alone. The text between ``<!-- move:begin -->``
and ``<!-- move:end -->`` is the move's own table: never rewritten, but replaced by
``move_section.md`` (the table as history) when a run moves files. A module at saga/'s
top that the table does not know stays put and is reported. A second run finds nothing
to do. Needs git; runs ruff (the project's) to sort and format the files it changed.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Callable
from pathlib import Path

MOVES: dict[str, str] = {
    # the public API: what saga/__init__.py exports, and its pieces
    "saga/app.py": "saga/api/app.py",
    "saga/app_graph.py": "saga/api/app_graph.py",
    "saga/app_io.py": "saga/api/app_io.py",
    "saga/app_types.py": "saga/api/app_types.py",
    "saga/app_waits.py": "saga/api/app_waits.py",
    "saga/app_maps.py": "saga/api/app_maps.py",
    "saga/client.py": "saga/api/client.py",
    "saga/pipeline.py": "saga/api/pipeline.py",
    "saga/retry.py": "saga/api/retry.py",
    "saga/schedules.py": "saga/api/schedules.py",
    "saga/undo.py": "saga/api/undo.py",
    # the wiring: settings -> clients -> worker processes
    "saga/runtime.py": "saga/wiring/runtime.py",
    "saga/ports.py": "saga/wiring/ports.py",
    "saga/up.py": "saga/wiring/up.py",
    "saga/logs.py": "saga/wiring/logs.py",
    "saga/log_output.py": "saga/wiring/log_output.py",
    # the configuration: the settings struct and its readers
    "saga/settings.py": "saga/config/settings.py",
    "saga/settings_groups.py": "saga/config/groups.py",
    "saga/settings_data.py": "saga/config/data.py",
    "saga/settings_redis.py": "saga/config/redis_checks.py",
    "saga/settings_steps.py": "saga/config/step_overrides.py",
    # the document pipeline's definition, beside its steps (saga.steps)
    "saga/documents.py": "saga/documents/pipeline.py",
    "saga/publish.py": "saga/documents/publish.py",
    "saga/review.py": "saga/documents/review.py",
    "saga/demo.py": "saga/documents/demo.py",
}

PACKAGES: dict[str, str] = {
    "saga/api": "The public API: ``saga.App`` and its pieces, ``SagaClient``, retries,\n"
    "schedules and undo steps (``saga/__init__.py`` exports the names people use).",
    "saga/wiring": "The wiring: settings -> Redis clients and ports -> worker processes, and\n"
    "the logging set-up they share.",
    "saga/config": "The configuration: one frozen ``Settings`` struct read from ``SAGA_*``\n"
    "variables (``settings.load_settings``) and its per-topic readers.",
    "saga/documents": "The document pipeline's definition (router -> parser -> grouper, the\n"
    "steps in ``saga.steps``), its publishing, review decisions and the demo.",
}

# Prepared hand edits (fixups.txt), applied after the rewrite to the text it leaves.
# Each applies once: a second run finds its old text gone. One whose old text is not
# found (a branch changed those lines) is reported, to be done by hand.
FIXUPS = Path(__file__).with_name("fixups.txt")

KEEP = {"saga/__init__.py", "saga/lean_imports.py"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".tpl", ".txt", ".sh"}
TEXT_NAMES = {"Dockerfile", "justfile", "dev", "Makefile", ".dockerignore", ".helmignore"}
TEXT_DIRS = (".ci/",)
# The chart's templates name their own helpers ("saga.settings"), not Python modules.
# tests/test_arch_move.py holds old names on purpose (its own tree to move).
SKIP_DIRS = (".move/", "deploy/helm/", "tests/test_arch_move.py")
BEGIN, END = "<!-- move:begin -->", "<!-- move:end -->"
HISTORY = Path(__file__).with_name("move_section.md")  # the move section after the move


def dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


class Rules:
    """The rewrite of one text: dotted names and paths, old -> new."""

    def __init__(self, moves: dict[str, str], pending: set[str]) -> None:
        mods: dict[str, str] = {}
        for old, new in moves.items():
            o, n = dotted(old), dotted(new)
            # A module that becomes a package (saga.documents -> saga.documents.pipeline):
            # after the move the bare name is the package, so it is rewritten only while
            # the old file is there (this run moves it); otherwise a second run would
            # rewrite saga.documents.pipeline's package references again.
            if n.startswith(o + ".") and old not in pending:
                continue
            mods[o] = n
        self.modules = mods
        subs: dict[str, set[str]] = {}
        for o in mods:
            subs[o] = {dotted(n)[len(o) + 1 :].split(".")[0] for n in moves.values()
                       if dotted(n).startswith(o + ".")}  # fmt: skip
        parts = []
        for o in sorted(mods, key=len, reverse=True):
            guard = "(?!\\.(?:{})\\b)".format("|".join(sorted(subs[o]))) if subs[o] else ""
            parts.append(re.escape(o) + r"(?!\w)" + guard)
        self.dotted = re.compile(r"(?<![\w.])({})".format("|".join(parts))) if parts else None
        paths = {old: new for old, new in moves.items() if dotted(old) in mods}
        self.paths = paths
        alts = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
        self.path = re.compile(rf"(?<![\w.-])({alts})(?![\w])") if paths else None

    def text(self, s: str) -> str:
        if self.path is not None:
            s = self.path.sub(lambda m: self.paths[m.group(1)], s)
        if self.dotted is not None:
            s = self.dotted.sub(lambda m: self.modules[m.group(1)], s)
        return s

    def from_saga(self, node: ast.ImportFrom) -> list[str] | None:
        """``from saga import a, b as c``: one statement per package, or None."""
        moved = [a for a in node.names if f"saga.{a.name}" in self.modules]
        if not moved:
            return None
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            target = self.modules.get(f"saga.{alias.name}", f"saga.{alias.name}")
            package, _, name = target.rpartition(".")
            as_name = alias.asname or (alias.name if name != alias.name else None)
            groups.setdefault(package, []).append(name + (f" as {as_name}" if as_name else ""))
        return [f"from {p} import {', '.join(names)}" for p, names in groups.items()]


def outside_move_section(s: str, fn: Callable[[str], str]) -> str:
    """fn over the text, except the move table between the markers."""
    head, sep, rest = s.partition(BEGIN)
    if not sep:
        return fn(s)
    section, sep2, tail = rest.partition(END)
    return fn(head) + BEGIN + section + sep2 + (fn(tail) if sep2 else "")


def _offsets(s: str) -> list[int]:
    starts = [0]
    for line in s.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _import_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _dotted_names(s: str, tree: ast.AST, rules: Rules) -> str:
    """Dotted names and paths in strings, comments and import statements."""
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import)]
    if any(rules.text(a.name) != a.name for n in imports for a in n.names):
        return rules.text(s)  # `import saga.app`: its uses in code are saga.app.X
    import_lines = _import_lines(tree)
    starts = _offsets(s)
    spans = [(starts[n - 1], starts[n]) for n in sorted(import_lines)]
    before = ["", ""]
    for tok in tokenize.generate_tokens(io.StringIO(s).readline):
        logger = before == ["get_logger", "("]  # a logger's name is output, not a module
        before = [before[1], tok.string]
        if logger or tok.start[0] in import_lines:
            continue
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            a = starts[tok.start[0] - 1] + tok.start[1]
            b = starts[tok.end[0] - 1] + tok.end[1]
            spans.append((a, b))
    for a, b in sorted(spans, reverse=True):
        s = s[:a] + rules.text(s[a:b]) + s[b:]
    return s


def _from_saga(s: str, tree: ast.AST, rules: Rules) -> str:
    """``from saga import review`` (at the top or in a function) -> its new package."""
    starts = _offsets(s)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "saga" and node.level == 0:
            new = rules.from_saga(node)
            if new is not None:
                a = starts[node.lineno - 1] + node.col_offset
                b = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
                edits.append((a, b, ("\n" + " " * node.col_offset).join(new)))
    for a, b, new in sorted(edits, reverse=True):
        s = s[:a] + new + s[b:]
    return s


def rewrite_python(s: str, rules: Rules) -> str:
    try:
        tree = ast.parse(s)
    except SyntaxError:
        return rules.text(s)  # not ours to parse (a fixture): plain text
    s = _dotted_names(s, tree, rules)
    return _from_saga(s, ast.parse(s), rules)


def tracked_text_files(root: Path) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    files = []
    for rel in filter(None, out.split("\0")):
        path = root / rel
        if rel.startswith(SKIP_DIRS) or path.is_symlink() or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES or rel.startswith(TEXT_DIRS):
            files.append(path)
    return files


def rewrite(path: Path, rules: Rules) -> str | None:
    """The file's new text, or None when it does not change."""
    try:
        old = path.read_text()
    except UnicodeDecodeError:
        return None
    if path.suffix == ".py":
        new = rewrite_python(old, rules)
    else:
        new = outside_move_section(old, rules.text)
    return None if new == old else new


def unknown_modules(root: Path) -> list[str]:
    tops = sorted(f"saga/{p.name}" for p in (root / "saga").glob("*.py"))
    return [t for t in tops if t not in KEEP and t not in MOVES]


def changed_lines(old: str, new: str) -> list[str]:
    o, n = old.splitlines(), new.splitlines()
    if len(o) != len(n):
        return [f"  ({len(o)} -> {len(n)} lines)"]
    return [f"  - {a.strip()}\n  + {b.strip()}" for a, b in zip(o, n, strict=True) if a != b]


def read_fixups() -> dict[str, list[tuple[str, str]]]:
    """``@@ <path>``, the old lines, ``@@ ->``, the new lines, ``@@ end``; repeated."""
    out: dict[str, list[tuple[str, str]]] = {}
    text = FIXUPS.read_text() if FIXUPS.is_file() else ""
    for block in re.findall(r"^@@ (\S+)\n(.*?)^@@ ->\n(.*?)^@@ end$", text, re.M | re.S):
        out.setdefault(block[0], []).append((block[1], block[2]))
    return out


def apply_fixups(root: Path, moved: bool) -> list[Path]:
    done = []
    for rel, edits in read_fixups().items():
        path = root / rel
        text = path.read_text() if path.is_file() else ""
        for old, new in edits:
            if old in text:
                text = text.replace(old, new)
                done.append(path)
                print(f"fix-up  {rel}")
            elif moved and new not in text:
                print(f"fix-up  {rel}: its text is not there; make the edit by hand:\n{new}")
        if path in done:
            path.write_text(text)
    return done


def ruff(root: Path, files: list[Path]) -> None:
    exe = shutil.which("ruff") or str(root / ".venv/bin/ruff")
    if not Path(exe).exists():
        print("ruff not found: sort imports and format the changed files yourself")
        return
    names = [str(f.relative_to(root)) for f in files]
    sort = [exe, "check", "--select", "I", "--fix", "--quiet", *names]
    subprocess.run(sort, cwd=root, check=False)  # what it cannot fix, lint reports
    subprocess.run([exe, "format", "--quiet", *names], cwd=root, check=True)
    # Longer names can push a comment or a string past the line length: left to a person.
    e501 = [exe, "check", "--select", "E501", "--output-format", "concise", *names]
    long = subprocess.run(e501, cwd=root, capture_output=True, text=True, check=False)
    for line in long.stdout.splitlines():
        if "E501" in line:
            print(f"by hand {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="dry run; exit 1 if work is left")
    parser.add_argument("--verbose", action="store_true", help="print each rewritten line")
    args = parser.parse_args(argv)
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                               capture_output=True, text=True).stdout.strip())  # fmt: skip
    pending = {old for old in MOVES if (root / old).is_file()}
    clash = [MOVES[o] for o in pending if (root / MOVES[o]).exists()]
    if clash:
        print(f"both an old path and its new one exist ({', '.join(sorted(clash))}); "
              "remove one and run again", file=sys.stderr)  # fmt: skip
        return 2
    rules = Rules(MOVES, pending)
    for old in sorted(pending):
        print(f"move    {old} -> {MOVES[old]}")
    wanted = {p for p in PACKAGES if any(MOVES[o].startswith(p + "/") for o in pending)}
    new_inits = sorted(p for p in wanted if not (root / p / "__init__.py").exists())
    for package in new_inits:
        print(f"create  {package}/__init__.py")
    for unknown in unknown_modules(root):
        print(f"unknown {unknown} stays at saga/'s top (add a row to MOVES to move it)")
    if not args.check:
        for package in new_inits:
            (root / package).mkdir(parents=True, exist_ok=True)
            doc = '"""' + PACKAGES[package] + '"""\n'
            (root / package / "__init__.py").write_text(doc)
            subprocess.run(["git", "add", f"{package}/__init__.py"], cwd=root, check=True)
        for old in sorted(pending):
            (root / MOVES[old]).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", old, MOVES[old]], cwd=root, check=True)
    history = None
    if pending and HISTORY.is_file():
        history = HISTORY.read_text()
    changed: list[Path] = []
    for path in tracked_text_files(root):
        new = rewrite(path, rules)
        if path.name == "ARCHITECTURE.md" and history is not None:
            text = new if new is not None else path.read_text()
            head, _, rest = text.partition(BEGIN)
            _, _, tail = rest.partition(END)
            new = head + BEGIN + "\n" + history.strip() + "\n" + END + tail
        if new is None:
            continue
        rel = path.relative_to(root)
        print(f"rewrite {rel}")
        if args.verbose:
            print("\n".join(changed_lines(path.read_text(), new)))
        if not args.check:
            path.write_text(new)
            changed.append(path)
    if not args.check:
        changed += apply_fixups(root, moved=bool(pending))
    if not args.check and any(p.suffix == ".py" for p in changed):
        ruff(root, sorted({p for p in changed if p.suffix == ".py"}))
    work = bool(pending or new_inits or changed or (args.check and history is not None))
    if args.check:
        return 1 if (pending or new_inits) or _would_rewrite(root, rules) else 0
    print("done" if work else "nothing to do")
    return 0


def _would_rewrite(root: Path, rules: Rules) -> bool:
    return any(rewrite(p, rules) is not None for p in tracked_text_files(root))


if __name__ == "__main__":
    sys.exit(main())
