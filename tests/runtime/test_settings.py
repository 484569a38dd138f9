"""Settings come from the environment in one function, with clear errors."""

from __future__ import annotations

import pytest

from saga.config.settings import SettingsError, load_settings


def test_defaults() -> None:
    """An empty environment gives the documented defaults."""
    s = load_settings({"SAGA_DATA_DIR": "/tmp/x"})
    assert (s.redis_url, s.partitions, s.health_port, s.key_prefix) == (None, 1, None, "saga")
    assert s.health_host == "127.0.0.1"
    assert s.limits.retention_s == 7 * 86400 and s.limits.pages_ttl_s == 3600
    assert s.parser == "rules" and s.drain_s is None  # None: the longest step timeout
    assert s.gc_threshold == 50_000


def test_health_host_defaults_to_every_address_in_kubernetes_only() -> None:
    """SAGA_HEALTH_HOST: loopback by default, 0.0.0.0 in a pod (probes come from the node)."""
    pod = load_settings({"SAGA_DATA_DIR": "/t", "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert pod.health_host == "0.0.0.0"
    own = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_HEALTH_HOST": "::1", "SAGA_HEALTH_PORT": "0"})
    assert (own.health_host, own.health_port) == ("::1", 0)


def test_per_step_overrides() -> None:
    """SAGA_<STEP>_CONCURRENCY|MAX_ATTEMPTS|TIMEOUT|LEASE land in the step's settings."""
    s = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_PARSER_CONCURRENCY": "3",
                       "SAGA_PARSER_MAX_ATTEMPTS": "7", "SAGA_ROUTER_TIMEOUT": "1.5",
                       "SAGA_ENRICHER_LEASE": "9",
                       "SAGA_PARSER_MAX_LEASE_EXPIRIES": "4"})  # fmt: skip
    assert s.for_step("parser").concurrency == 3 and s.for_step("parser").max_attempts == 7
    assert s.for_step("router").timeout_s == 1.5 and s.for_step("enricher").lease_s == 9
    assert s.for_step("grouper").concurrency is None
    assert s.for_step("parser").max_lease_expiries == 4


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("SAGA_PARTITIONS", "many", "is not a number"),
        ("SAGA_DRAIN_SECONDS", "-1", "must not be negative"),
        ("SAGA_LOG_FORMAT", "xml", "json or console"),
        ("SAGA_PARSER", "magic", "rules or llm"),
        ("SAGA_GC_THRESHOLD", "-5", "must not be negative"),
        ("SAGA_GC_THRESHOLD", "lots", "is not a number"),
        ("SAGA_PARSER_MIN_COVERAGE", "80", "between 0 and 1"),
        ("SAGA_PARSER_MIN_COVERAGE", "-0.1", "must not be negative"),
        ("SAGA_GROUPER_EMBEDDING_THRESHOLD", "90", "between 0 and 1"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str, says: str) -> None:
    """A bad value is a SettingsError naming the variable and the problem."""
    with pytest.raises(SettingsError, match=name) as err:
        load_settings({"SAGA_DATA_DIR": "/t", name: value})
    assert says in str(err.value)


def test_document_source_reaches_the_steps() -> None:
    """SAGA_DOCUMENT_SOURCE is handed to the router through the step config."""
    s = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_DOCUMENT_SOURCE": "/d/{record_id}.pdf"})
    assert s.step_config.document_source == "/d/{record_id}.pdf"


def test_min_coverage_reaches_the_parser() -> None:
    """SAGA_PARSER_MIN_COVERAGE is the parser's review threshold; 0.9 when unset."""
    assert load_settings({"SAGA_DATA_DIR": "/t"}).step_config.min_coverage == 0.9
    s = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_PARSER_MIN_COVERAGE": "0.5"})
    assert s.step_config.min_coverage == 0.5


def test_embedding_grouper_settings_reach_the_grouper() -> None:
    """Unset: offline grouping at threshold 0.9; set: the model, threshold and API base."""
    plain = load_settings({"SAGA_DATA_DIR": "/t"})
    assert (plain.step_config.embedding_model, plain.step_config.embedding_threshold) == ("", 0.9)
    s = load_settings(
        {
            "SAGA_DATA_DIR": "/t",
            "SAGA_GROUPER_EMBEDDING_MODEL": "openai/text-embedding-3-small",
            "SAGA_GROUPER_EMBEDDING_THRESHOLD": "0.8",
            "SAGA_GROUPER_EMBEDDING_API_BASE": "http://embed:4000/v1",
        }
    )
    assert s.step_config.embedding_model == "openai/text-embedding-3-small"
    assert s.step_config.embedding_threshold == 0.8
    assert s.grouper_embedding_api_base == "http://embed:4000/v1" and s.steps == {}


def test_breakers_reported_are_those_the_deployment_uses() -> None:
    """llm always; embedding with a grouper embedding model; billing with a billing URL."""
    assert load_settings({"SAGA_DATA_DIR": "/t"}).breakers() == ("llm",)
    every = load_settings(
        {
            "SAGA_DATA_DIR": "/t",
            "SAGA_GROUPER_EMBEDDING_MODEL": "openai/text-embedding-3-small",
            "SAGA_BILLING_URL": "http://billing:8000",
        }
    )
    assert every.breakers() == ("llm", "embedding", "billing")
