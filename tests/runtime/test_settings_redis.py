"""The Redis connection settings are checked at load time, each refusal one SettingsError."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.config.settings import SettingsError, load_settings

BASE = {"SAGA_DATA_DIR": "/t"}


def test_tls_files_are_taken_with_a_rediss_url(tmp_path: Path) -> None:
    """CA, certificate and key files that exist land in the settings with rediss://."""
    files = {n: tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem")}
    for path in files.values():
        path.write_text("x")
    s = load_settings(
        {
            **BASE,
            "REDIS_URL": "rediss://redis.example:6380",
            "SAGA_REDIS_CA_FILE": str(files["ca.pem"]),
            "SAGA_REDIS_CERT_FILE": str(files["cert.pem"]),
            "SAGA_REDIS_KEY_FILE": str(files["key.pem"]),
        }
    )
    assert (s.redis_ca_file, s.redis_cert_file, s.redis_key_file) == tuple(
        str(p) for p in files.values()
    )


def test_tls_files_are_ignored_for_the_embedded_server(tmp_path: Path) -> None:
    """Without REDIS_URL (a unix socket) the TLS variables configure nothing."""
    s = load_settings({**BASE, "SAGA_REDIS_CA_FILE": str(tmp_path / "absent.pem")})
    assert (s.redis_ca_file, s.redis_cert_file, s.redis_key_file) == (None, None, None)


def test_a_tls_file_with_a_plain_url_is_refused(tmp_path: Path) -> None:
    """SAGA_REDIS_CA_FILE with redis:// says to use rediss://."""
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    env = {**BASE, "REDIS_URL": "redis://redis.example", "SAGA_REDIS_CA_FILE": str(ca)}
    with pytest.raises(SettingsError, match="SAGA_REDIS_CA_FILE is set but REDIS_URL"):
        load_settings(env)


def test_a_missing_tls_file_is_refused(tmp_path: Path) -> None:
    """A key file that does not exist is named."""
    env = {**BASE, "REDIS_URL": "rediss://r", "SAGA_REDIS_KEY_FILE": str(tmp_path / "no.pem")}
    with pytest.raises(SettingsError, match=r"SAGA_REDIS_KEY_FILE=.* is not a readable file"):
        load_settings(env)


@pytest.mark.parametrize("query", ["ssl_cert_reqs=none", "ssl_check_hostname=false"])
def test_certificate_checks_off_in_the_url_need_the_insecure_flag(query: str) -> None:
    """A URL that turns certificate checks off is refused unless SAGA_REDIS_TLS_INSECURE=1."""
    env = {**BASE, "REDIS_URL": f"rediss://r:6380/0?{query}"}
    with pytest.raises(SettingsError, match="SAGA_REDIS_TLS_INSECURE"):
        load_settings(env)
    assert load_settings({**env, "SAGA_REDIS_TLS_INSECURE": "1"}).redis_url == env["REDIS_URL"]


def test_the_reply_timeout_must_outlast_a_blocking_read() -> None:
    """SAGA_REDIS_TIMEOUT at or under SAGA_BLOCK_MS is refused; just over it is taken."""
    with pytest.raises(SettingsError, match="longer than SAGA_BLOCK_MS"):
        load_settings({**BASE, "SAGA_REDIS_TIMEOUT": "2", "SAGA_BLOCK_MS": "2000"})
    s = load_settings({**BASE, "SAGA_REDIS_TIMEOUT": "2.5", "SAGA_BLOCK_MS": "2000"})
    assert (s.redis_timeout_s, s.block_ms) == (2.5, 2000)


def test_a_bad_step_override_names_the_variable() -> None:
    """SAGA_<STEP>_CONCURRENCY that is not a whole number is a SettingsError naming it."""
    with pytest.raises(SettingsError, match=r"SAGA_PARSER_CONCURRENCY='1\.5' is not a number"):
        load_settings({**BASE, "SAGA_PARSER_CONCURRENCY": "1.5"})
