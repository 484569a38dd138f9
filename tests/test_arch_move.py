"""The architecture move's script (.move/arch_move.py, issue 37) on a small git tree of
its own: it moves the table's files, rewrites each kind of reference, leaves a variable
named ``saga`` and unknown modules alone, and a second run changes nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / ".move" / "arch_move.py"

TREE = {
    "saga/__init__.py": '_HOMES = {"App": "saga.app", "SagaClient": "saga.client"}\n',
    "saga/app.py": "class App:\n    pass\n",
    "saga/client.py": "from saga.app import App\n\n\nclass SagaClient:\n    app: App\n",
    "saga/documents.py": "from saga.app import App\n\napp = App()\n",
    "saga/review.py": "def decide() -> None:\n    pass\n",
    "saga/settings.py": "X = 1\n",
    "saga/app_timers.py": "import saga.app\n\nT = saga.app.App\n",  # a later branch's
    "saga/cli/__init__.py": "",
    "saga/cli/cmd_show.py": (
        'import structlog\n\nlog = structlog.get_logger("saga.review")\n\n\n'
        "def show(saga):\n"
        "    from saga import review, settings\n\n"
        "    for step in saga.review.items():  # a saga's field, not the module\n"
        "        review.decide()\n"
        '    return settings.X, "saga.documents:app"\n'
    ),
    "tests/test_x.py": 'def test(monkeypatch):\n    monkeypatch.setattr("saga.settings.X", 2)\n',
    "docs/x.md": "See `saga/settings.py` and `saga.documents`; not `saga/settings_other.py`.\n",
    "ARCHITECTURE.md": "`saga/app.py`\n<!-- move:begin -->\n`saga/app.py` → `saga/api/app.py`\n"
    "<!-- move:end -->\n",
    "pyproject.toml": '[project.entry-points."saga.steps"]\nx = "saga.documents:REG"\n',
}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, ".move/arch_move.py", *args], cwd=root, check=False,
                          capture_output=True, text=True)  # fmt: skip


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel, text in TREE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / ".move").mkdir()
    shutil.copy(SCRIPT, tmp_path / ".move" / "arch_move.py")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree")
    return tmp_path


def test_check_reports_the_work_and_changes_nothing(tree: Path) -> None:
    """--check lists the moves and the unknown module, exits 1, and touches no file."""
    done = _run(tree, "--check")
    assert done.returncode == 1, done.stderr
    assert "move    saga/app.py -> saga/api/app.py" in done.stdout
    assert "unknown saga/app_timers.py" in done.stdout
    assert _git(tree, "status", "--porcelain") == ""


def test_the_move_rewrites_every_kind_of_reference_once(tree: Path) -> None:
    """Files move; imports, lazy ``from saga import``, strings, paths and entry points
    follow; a variable ``saga``, a logger's name and the move table stay; run twice,
    the second run changes nothing and --check exits 0."""
    done = _run(tree)
    assert done.returncode == 0, done.stderr
    assert not (tree / "saga/app.py").exists() and (tree / "saga/api/app.py").is_file()
    assert (tree / "saga/documents/pipeline.py").is_file()
    assert (tree / "saga/api/__init__.py").read_text().startswith('"""The public API')
    assert (tree / "saga/app_timers.py").is_file(), "an unknown module stays put"
    read = {rel: (tree / rel).read_text() for rel in ("saga/__init__.py", "saga/cli/cmd_show.py",
            "saga/app_timers.py", "tests/test_x.py", "docs/x.md", "ARCHITECTURE.md",
            "pyproject.toml", "saga/api/client.py")}  # fmt: skip
    assert '"saga.api.app"' in read["saga/__init__.py"]
    assert "from saga.api.app import App" in read["saga/api/client.py"]
    show = read["saga/cli/cmd_show.py"]
    assert "from saga.documents import review" in show
    assert "from saga.config import settings" in show
    assert "saga.review.items()" in show and 'get_logger("saga.review")' in show
    assert '"saga.documents.pipeline:app"' in show
    assert "T = saga.api.app.App" in read["saga/app_timers.py"]
    assert '"saga.config.settings.X"' in read["tests/test_x.py"]
    assert read["docs/x.md"].startswith("See `saga/config/settings.py` and `saga.documents.")
    assert "`saga/settings_other.py`" in read["docs/x.md"]
    assert read["ARCHITECTURE.md"].startswith("`saga/api/app.py`\n")
    assert "`saga/app.py` → `saga/api/app.py`" in read["ARCHITECTURE.md"]
    assert '"saga.documents.pipeline:REG"' in read["pyproject.toml"]
    _git(tree, "add", "-A")
    again = _run(tree)
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout
    assert _git(tree, "ls-files", "--others", "--exclude-standard") == ""
    assert _git(tree, "diff") == "", "the second run wrote nothing"
    assert _run(tree, "--check").returncode == 0


def test_a_clash_is_one_sentence_and_exit_2(tree: Path) -> None:
    """An old path whose new one exists too is refused before anything moves."""
    (tree / "saga/api").mkdir()
    (tree / "saga/api/app.py").write_text("")
    done = _run(tree)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "saga/api/app.py" in done.stderr
    assert (tree / "saga/app.py").is_file()


def test_the_documents_app_keeps_its_old_reference() -> None:
    """SAGA_PIPELINE=saga.documents:app, as set before the move, names the same App."""
    import saga.documents
    from saga.documents.pipeline import app

    assert saga.documents.app is app
