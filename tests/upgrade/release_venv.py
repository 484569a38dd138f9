"""A release's own venv, built from its commit offline in a few seconds.

``git archive <commit>`` into a directory, a venv without pip whose site-packages has a
``.pth`` naming this venv's site-packages (the dependencies, not reinstalled), then
``pip install --no-deps --no-build-isolation`` of the release's source into it (pip of
this venv, ``--python`` the new one; ~3 s: setuptools builds the wheel, nothing is
downloaded). Its ``saga`` is the installed wheel, not this checkout: a ``.pth`` line is
a plain path, so the editable install's own ``.pth`` there is never processed. Its test
modules (the fault pipeline its workers load) come from the archive's ``tests/``, on
``PYTHONPATH`` through a directory holding only that.

Built once per commit (and this venv) under the cache directory it is given, into a
temporary directory renamed into place: parallel test processes never see half a venv.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


@dataclass(frozen=True)
class Release:
    """A release's venv, ready to run ``python -m saga.cli.main``."""

    commit: str
    home: Path

    @property
    def python(self) -> Path:
        return self.home / "venv" / "bin" / "python"

    @property
    def src(self) -> Path:
        """The release's source tree, as ``git archive`` wrote it."""
        return self.home / "src"

    @property
    def path(self) -> Path:
        """What its processes get as PYTHONPATH (and cwd): the release's ``tests`` only."""
        return self.home / "path"

    def constant(self, module: str, name: str) -> int:
        """An int constant of one of the release's modules, read from its source (e.g.
        ``state/schema_version.py``'s ``CURRENT``), 0 where it does not exist."""
        file = self.src / module
        if not file.exists():
            return 0
        for node in ast.parse(file.read_text(encoding="utf-8")).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else None
            target = node.target if isinstance(node, ast.AnnAssign) else target
            value = getattr(node, "value", None)
            if (
                isinstance(target, ast.Name)
                and target.id == name
                and isinstance(value, ast.Constant)
                and isinstance(value.value, int)
            ):
                return value.value
        return 0


class ReleaseUnavailable(RuntimeError):
    """The commit is not in this checkout (a shallow clone), or git is missing."""


def release_of(commit: str, cache: Path) -> Release:
    """The release of ``commit``, built under ``cache`` unless it already is."""
    site = sysconfig.get_paths()["purelib"]
    key = hashlib.sha256(f"{commit}\n{site}\n{sys.version}".encode()).hexdigest()[:12]
    home = cache / f"release-{commit[:12]}-{key}"
    if (home / "ready").exists():
        return Release(commit, home)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".building-{commit[:12]}-", dir=cache))
    try:
        _build(commit, tmp, site)
        with contextlib.suppress(FileExistsError, OSError):
            os.rename(tmp, home)  # another process may have won: its build is the same
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not (home / "ready").exists():
        raise RuntimeError(f"the release venv of {commit[:12]} was not built in {home}")
    return Release(commit, home)


def _build(commit: str, home: Path, site: str) -> None:
    src = home / "src"
    src.mkdir()
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", commit],
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ReleaseUnavailable(
            f"commit {commit[:12]} cannot be archived from {REPO} ({exc}); "
            "fetch it (`git fetch --unshallow`) to run the rolling-upgrade test"
        ) from None
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    own = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PURELIB],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(own, "_dependencies.pth").write_text(site + "\n", encoding="utf-8")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", "--no-deps", "--no-build-isolation", str(src)],
        check=True, capture_output=True, env=env, cwd=home,
    )  # fmt: skip
    path = home / "path"
    path.mkdir()
    (path / "tests").symlink_to(Path("..", "src", "tests"), target_is_directory=True)  # moves along
    (home / "ready").write_text(commit + "\n", encoding="utf-8")
