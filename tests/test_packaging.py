"""The built wheel works in a fresh virtual environment; the public API is pinned."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import saga
import saga.api.client

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_installs_and_runs_in_a_fresh_venv(tmp_path: Path, redis_url: str) -> None:
    """pip install of the built wheel imports every layer, ships the JSON schemas and runs
    `saga init` for real."""
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    wheel = next(dist.glob("saga_runner-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)  # fmt: skip
    # Dependencies come from this environment's site-packages as a plain path entry
    # (its .pth files, including the editable finder, are not processed).
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    Path(site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = (
        "import saga, saga.state.scripts as s, saga.steps.router, saga.adapters.documents, "
        "saga.samples as m; "
        f"assert saga.__file__.startswith({str(env_dir)!r}), saga.__file__; "
        "assert len(m.list_samples()) >= 4; "
        "from importlib import resources; "
        "assert resources.files('saga.cli').joinpath('schemas/show.json').is_file(); "
        "c = resources.files('saga.console'); "
        "assert (c / 'templates' / 'saga.html').is_file() and (c / 'static' / 'console.js')"
        ".is_file(), 'console templates or static files missing from the wheel'; "
        "print(s.version())"
    )
    out = subprocess.run(
        [py, "-c", probe], check=False, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip()) == 12
    env = {**os.environ, "REDIS_URL": redis_url, "SAGA_KEY_PREFIX": "wheeltest"}
    res = subprocess.run([env_dir / "bin" / "saga", "init", "--json"], env=env,
                         capture_output=True, text=True, check=False, cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert '"groups_created": 3' in res.stdout


def test_editable_install_maps_the_four_folders() -> None:
    """saga.state, saga.steps and saga.adapters resolve to the top-level folders."""
    import saga.adapters
    import saga.state
    import saga.steps

    for name, module in [("state", saga.state), ("steps", saga.steps), ("adapters", saga.adapters)]:
        assert Path(module.__file__ or "").resolve().parent == ROOT / name


def test_public_api_is_pinned() -> None:
    """The exported names of the package and the client do not change by accident."""
    assert saga.__all__ == [
        "App",
        "AppError",
        "InvalidInputError",
        "MapResults",
        "NotFoundError",
        "PermanentError",
        "RetryableError",
        "SagaClient",
        "StepContext",
        "__version__",
    ]
    assert all(getattr(saga, name) is not None for name in saga.__all__)
    assert {n for n in dir(saga.App) if not n.startswith("_")} == {
        "name",
        "step",
        "wait",
        "sleep",
        "sleep_until",
        "review_gate",
        "map",
        "schedule",
        "build",
        "pipeline",
        "client",
    }
    assert saga.api.client.__all__ == ["SagaClient"]
    public = {n for n in dir(saga.api.client.SagaClient) if not n.startswith("_")}
    assert public == {
        "start",
        "get",
        "history",
        "retry",
        "cancel",
        "signal",
        "compensate",
        "accept_review",
        "set_budget",
        "budget",
        "budgets",
        "clear_budget",
        "aclose",
        "from_settings",
        "for_type",
        "redis",
        "keys",
        "pipeline",
        "sm",
        "type_info",
    } - {"redis", "keys", "pipeline", "sm", "type_info"}
