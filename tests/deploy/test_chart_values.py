"""Bad values fail at `helm install` time with a message that names the key."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.chart import example, merged, render_error, schema_error


def small(**override: Any) -> dict[str, Any]:
    return merged(example("small"), override)


def test_negative_replica_count_is_rejected() -> None:
    """steps.<name>.replicas below zero fails, naming the key and the bound."""
    message = schema_error(small(steps={"parser": {"replicas": -1}}))
    assert "/steps/parser/replicas" in message
    assert "minimum" in message


def test_unknown_top_level_key_is_rejected() -> None:
    """A misspelt top-level key fails, naming the key."""
    message = schema_error(small(replicaCount=3))
    assert "replicaCount" in message
    assert "not allowed" in message


def test_unknown_step_key_is_rejected() -> None:
    """A misspelt per-step key fails, naming the step and the key."""
    message = schema_error(small(steps={"parser": {"concurency": 4}}))
    assert "/steps/parser" in message
    assert "concurency" in message


def test_unknown_keda_key_is_rejected() -> None:
    """A misspelt KEDA setting of a step fails instead of being ignored."""
    message = schema_error(small(steps={"router": {"keda": {"maxReplica": 4}}}))
    assert "/steps/router/keda" in message
    assert "maxReplica" in message


def test_step_name_must_be_a_runtime_step_name() -> None:
    """A step name the runtime would refuse (capitals, dashes) fails."""
    message = schema_error(small(steps={"Enricher-2": {}}))
    assert "Enricher-2" in message
    assert "pattern" in message


@pytest.mark.parametrize(
    ("override", "path"),
    [
        ({"config": {"partitions": 0}}, "/config/partitions"),
        ({"config": {"keyPrefix": "has space"}}, "/config/keyPrefix"),
        ({"config": {"logFormat": "xml"}}, "/config/logFormat"),
        ({"stepDefaults": {"timeoutSeconds": 0}}, "/stepDefaults"),
        ({"steps": {"router": {"concurrency": "4"}}}, "/steps/router/concurrency"),
        ({"redis": {"address": "redis://h:6379"}}, "/redis/address"),
        ({"redis": {"existingSecret": ""}}, "/redis/existingSecret"),
    ],
)
def test_out_of_range_values_are_rejected(override: dict[str, Any], path: str) -> None:
    """Wrong types, bounds, enums and patterns fail with the offending path."""
    assert path in schema_error(small(**override))


def test_a_password_cannot_be_given_as_a_value() -> None:
    """There is no value to inline a credential: redis.password is an unknown key."""
    message = schema_error(small(redis={"password": "hunter2"}))
    assert "password" in message
    assert "hunter2" not in message


def test_missing_redis_location_fails_in_words() -> None:
    """Neither a URL key nor host/port keys: the render fails saying what to set."""
    values = small(redis={"secretKeys": {"url": "", "host": ""}})
    assert "set `url`, or both `host` and `port`" in render_error(values)


def test_keda_without_an_address_fails_in_words() -> None:
    """KEDA on, a URL-only Secret and no redis.address: the render says KEDA needs host:port."""
    values = small(redis={"secretKeys": {"url": "url", "host": "", "port": ""}})
    assert "KEDA cannot read a redis:// URL" in render_error(values)


def test_ca_without_tls_fails_in_words() -> None:
    """A CA bundle with TLS off is a mistake the render names."""
    values = small(redis={"secretKeys": {"ca": "ca.crt"}})
    assert "redis.tls: true" in render_error(values)


def test_cluster_with_a_database_number_fails_in_words() -> None:
    """Cluster mode has only database 0; another number fails."""
    values = small(redis={"cluster": True, "database": 2})
    assert "redis.database must be 0" in render_error(values)


def test_min_replicas_above_max_fails_in_words() -> None:
    """A step whose KEDA minimum exceeds its maximum fails, naming the step."""
    values = small(steps={"parser": {"keda": {"minReplicas": 5, "maxReplicas": 2}}})
    assert "steps.parser.keda: minReplicas (5) is above maxReplicas (2)" in render_error(values)


def test_no_enabled_step_fails_in_words() -> None:
    """Switching every step off fails instead of rendering an empty pipeline."""
    off = {"enabled": False}
    values = small(steps={"router": off, "parser": off, "grouper": off})
    assert "at least one step must be enabled" in render_error(values)
