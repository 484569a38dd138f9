"""``saga start --document``: paths are the caller's, made absolute and checked at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from saga.state.errors import SagaNotFoundError
from saga.state.keys import Keys
from saga.state.reads import get_saga
from tests.executor.test_documents_e2e import saga_cli

pytestmark = pytest.mark.anyio


async def test_a_relative_path_is_stored_absolute(
    keys: Keys, redis_url: str, redis: Any, tmp_path: Path
) -> None:
    """A relative --document resolves against the caller's directory, not the worker's."""
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "report.pdf").write_bytes(b"%PDF-1.4")
    res = saga_cli(keys, redis_url, "start", "r1", "u1", "--document", "labs/../labs/report.pdf",
                   cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (await get_saga(redis, keys, "r1")).document == str(tmp_path / "labs" / "report.pdf")


@pytest.mark.parametrize(
    ("ref", "says"), [("missing.pdf", "does not exist"), (".", "is a directory")]
)
async def test_a_path_that_is_no_file_is_refused_at_start(
    keys: Keys, redis_url: str, redis: Any, tmp_path: Path, ref: str, says: str
) -> None:
    """A path with no file behind it is exit 2 with one sentence, and no saga is started."""
    res = saga_cli(keys, redis_url, "start", "r1", "u1", "--document", ref, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and says in res.stderr and str(tmp_path) in res.stderr
    with pytest.raises(SagaNotFoundError):
        await get_saga(redis, keys, "r1")


async def test_urls_pass_as_given(keys: Keys, redis_url: str, redis: Any, tmp_path: Path) -> None:
    """URLs (file:// included: it names a worker's file) are stored as given, unchecked."""
    for n, ref in enumerate(["file:///srv/docs/r1.pdf", "https://records.internal/d/r1?sig=x"]):
        res = saga_cli(keys, redis_url, "start", f"r{n}", "u1", "--document", ref, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert (await get_saga(redis, keys, f"r{n}")).document == ref


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--document", "ftp://files.example/r1.pdf"], "scheme 'ftp'"),
        (["--input", '{"document": "gopher://x/r1.pdf"}'], "scheme 'gopher'"),
        (["--input", '{"doc": "/srv/r1.pdf"}'], "reads no field 'doc'"),
    ],
)
async def test_a_start_that_can_only_dead_letter_is_refused(
    keys: Keys, redis_url: str, redis: Any, tmp_path: Path, argv: list[str], says: str
) -> None:
    """A scheme the router cannot fetch, or an --input whose fields the router does not
    read (its document silently dropped): exit 2, one sentence, no saga."""
    res = saga_cli(keys, redis_url, "start", "r1", "u1", *argv, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and says in res.stderr, res.stderr
    with pytest.raises(SagaNotFoundError):
        await get_saga(redis, keys, "r1")
