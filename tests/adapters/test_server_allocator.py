"""The embedded server's allocator: the choice as a table, then real servers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from saga.adapters.embedded_redis import EmbeddedServer, server_binary
from saga.adapters.server_allocator import (
    GLIBC_TUNED,
    JEMALLOC_FILE,
    AllocatorError,
    built_with,
    choose,
    find_jemalloc,
)
from saga.config.settings import SettingsError, load_settings

JE = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")


def test_a_libc_build_gets_jemalloc_when_the_machine_has_it() -> None:
    assert choose("auto", "libc", {}, JE, system="Linux") == {"LD_PRELOAD": str(JE)}


def test_a_libc_build_without_jemalloc_gets_the_tuned_glibc_malloc() -> None:
    assert choose("auto", "libc", {}, None, system="Linux") == {"GLIBC_TUNABLES": GLIBC_TUNED}
    assert "tcache_count" in GLIBC_TUNED


def test_tuned_is_used_even_where_jemalloc_is_found() -> None:
    assert choose("tuned", "libc", {}, JE, system="Linux") == {"GLIBC_TUNABLES": GLIBC_TUNED}


def test_a_jemalloc_build_and_libc_are_left_as_built() -> None:
    assert choose("auto", "jemalloc-5.3.0", {}, JE, system="Linux") == {}
    assert choose("jemalloc", "jemalloc-5.3.0", {}, None, system="Linux") == {}
    assert choose("libc", "libc", {}, JE, system="Linux") == {}


def test_a_callers_own_preload_or_tunables_are_kept() -> None:
    for env in ({"LD_PRELOAD": "/opt/tcmalloc.so"}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"}):
        assert choose("auto", "libc", env, JE, system="Linux") == {}


def test_nothing_is_preloaded_off_linux() -> None:
    assert choose("auto", "libc", {}, JE, system="Darwin") == {}
    with pytest.raises(AllocatorError, match="only done on Linux"):
        choose("jemalloc", "libc", {}, JE, system="Darwin")


def test_jemalloc_asked_for_but_missing_names_the_library() -> None:
    with pytest.raises(AllocatorError, match=JEMALLOC_FILE) as err:
        choose("jemalloc", "libc", {}, None, system="Linux")
    assert "libjemalloc2" in str(err.value)


def test_an_unknown_choice_is_refused_by_name() -> None:
    with pytest.raises(AllocatorError, match="SAGA_EMBEDDED_MALLOC='mimalloc'"):
        choose("mimalloc", "libc", {}, JE, system="Linux")


def test_settings_validate_the_choice() -> None:
    assert load_settings({}).embedded_malloc == "auto"
    assert load_settings({"SAGA_EMBEDDED_MALLOC": " JEMALLOC "}).embedded_malloc == "jemalloc"
    with pytest.raises(SettingsError, match="SAGA_EMBEDDED_MALLOC='fast'"):
        load_settings({"SAGA_EMBEDDED_MALLOC": "fast"})


def test_find_jemalloc_looks_in_the_given_dirs(tmp_path: Path) -> None:
    empty, lib = tmp_path / "empty", tmp_path / "lib"
    empty.mkdir()
    lib.mkdir()
    (lib / JEMALLOC_FILE).write_bytes(b"")
    assert find_jemalloc((str(empty),)) is None
    assert find_jemalloc((str(empty), str(lib))) == lib / JEMALLOC_FILE


# -- real servers ---------------------------------------------------------------------
def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text(errors="replace")


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


# glibc's tunables parser cuts the variable at its first ':' in place (2.36), and the
# server's process title overwrites the start of its environment: match the head only.
OURS = b"GLIBC_TUNABLES=" + GLIBC_TUNED.split(":", 1)[0].encode()


Start = Callable[[str], EmbeddedServer]


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    servers: list[EmbeddedServer] = []

    def start(malloc: str) -> EmbeddedServer:
        server = EmbeddedServer(data_dir=tmp_path / malloc, tied=True, malloc=malloc)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


linux_only = pytest.mark.skipif(
    not Path("/proc/self/maps").exists(), reason="reads /proc, which only Linux has"
)


@linux_only
def test_the_embedded_server_runs_with_what_auto_chose(started: Start) -> None:
    built = built_with(str(server_binary()))
    server = started("auto")
    assert server.pid is not None
    if not built.startswith("libc"):
        assert server.allocator_in_use() == built
    elif find_jemalloc() is not None:
        assert JEMALLOC_FILE in _maps(server.pid)
        assert server.allocator_in_use() == "jemalloc (preloaded)"  # `saga server status`
    else:
        assert OURS in _environ(server.pid)
        assert server.allocator_in_use() == "libc (tuned)"


@linux_only
def test_libc_starts_the_binary_as_built(started: Start) -> None:
    server = started("libc")
    assert server.pid is not None
    assert JEMALLOC_FILE not in _maps(server.pid)
    assert b"GLIBC_TUNABLES=" not in _environ(server.pid)
    assert server.allocator_in_use() == built_with(str(server_binary()))


@linux_only
def test_tuned_reaches_a_libc_server_and_leaves_a_jemalloc_build_alone(started: Start) -> None:
    built = built_with(str(server_binary()))
    server = started("tuned")
    assert server.pid is not None
    if built.startswith("libc"):
        assert OURS in _environ(server.pid)
        assert server.allocator_in_use() == "libc (tuned)"
    else:
        assert b"GLIBC_TUNABLES=" not in _environ(server.pid)
        assert server.allocator_in_use() == built
    assert os.environ.get("GLIBC_TUNABLES") is None  # ours went to the child only
