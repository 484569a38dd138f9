"""KEDA on a Redis Cluster: the `redis-cluster-streams` triggers the chart renders (one
pair per partition) reach the Redis the workers' client reaches, with the same TLS,
credentials and CA, and watch exactly the streams and group the client reads.

The chart is rendered with Helm (tests/deploy/chart.py); the pods' environment is
resolved against a Secret and read with the real ``load_settings``, so both sides are
what would run."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from saga.runtime import keys_of
from saga.settings import load_settings
from saga.state.keys import GROUP
from tests.deploy.chart import container, env_of, example, merged, of_kind, render

ENDPOINT = {"host": "redis-0.redis.svc", "port": "6380", "username": "saga-app",
            "password": "s3cret", "ca.crt": "-----BEGIN CERTIFICATE-----\nCA\n"}  # fmt: skip
SECRET = {**ENDPOINT, "url": "rediss://saga-app:s3cret@redis-0.redis.svc:6380/0"}
"""The Secret an operator creates: the same endpoint under each key the chart reads."""

CLUSTER_VARIANTS = {
    "small": merged(
        example("small"),
        {
            "redis": {
                "cluster": True,
                "tls": True,
                "secretKeys": {"username": "username", "ca": "ca.crt"},
            }
        },
    ),
    "large": merged(example("large"), {"redis": {"cluster": True}}),
}


def _secret_value(ref: dict[str, Any]) -> str:
    """The Redis Secret's value; other Secrets (billing) hold something else."""
    key = ref["secretKeyRef"]
    return SECRET[key["key"]] if key["name"] == "saga-redis" else "other-secret"


def pod_settings(objs: list[dict[str, Any]], deployment: dict[str, Any]) -> Any:
    """What the worker's settings would be: its ConfigMap, then its env with
    secretKeyRefs read from the Secret and $(VAR) references expanded."""
    ctr = container(deployment)
    env: dict[str, str] = {}
    for src in ctr.get("envFrom", []):
        env.update(of_kind(objs, "ConfigMap")[src["configMapRef"]["name"]]["data"])
    for name, e in env_of(ctr).items():
        raw = _secret_value(e["valueFrom"]) if "valueFrom" in e else e["value"]
        env[name] = re.sub(r"\$\(([A-Z_]+)\)", lambda m: env[m.group(1)], raw)
    return load_settings(env), env


def ca_seen_by_pods(deployment: dict[str, Any], ca_file: str) -> str:
    """The CA the pods read at SAGA_REDIS_CA_FILE: which Secret key is mounted there."""
    pod, ctr = deployment["spec"]["template"]["spec"], container(deployment)
    for mount in ctr.get("volumeMounts", []):
        if ca_file.startswith(mount["mountPath"] + "/"):
            volume = {v["name"]: v for v in pod["volumes"]}[mount["name"]]["secret"]
            path = ca_file[len(mount["mountPath"]) + 1 :]
            (item,) = [i for i in volume["items"] if i["path"] == path]
            return SECRET[item["key"]]
    raise AssertionError(f"{ca_file} is not mounted")


def keda_params(objs: list[dict[str, Any]], trigger: dict[str, Any]) -> dict[str, str]:
    """A trigger's parameters: its metadata plus its TriggerAuthentication's."""
    params = dict(trigger["metadata"])
    if "authenticationRef" in trigger:
        auth = of_kind(objs, "TriggerAuthentication")[trigger["authenticationRef"]["name"]]
        for ref in auth["spec"]["secretTargetRef"]:
            params[ref["parameter"]] = SECRET[ref["key"]]
    return params


@pytest.mark.parametrize("variant", sorted(CLUSTER_VARIANTS))
def test_cluster_triggers_reach_what_the_client_reaches(variant: str) -> None:
    """Per step: host and port among KEDA's seeds, TLS on both sides or neither, the same
    user, password and CA, one lag and one pending trigger per partition stream."""
    objs = render(CLUSTER_VARIANTS[variant])
    scaled = of_kind(objs, "ScaledObject")
    assert scaled
    deployments = of_kind(objs, "Deployment")
    for so in scaled.values():
        deployment = deployments[so["spec"]["scaleTargetRef"]["name"]]
        settings, env = pod_settings(objs, deployment)
        url = urlsplit(settings.redis_url)
        keys = keys_of(settings)
        streams = {keys.ready(p, env["SAGA_STEP"]) for p in keys.all_partitions()}
        assert settings.cluster
        seen: dict[str, set[str]] = {"lag": set(), "pending": set()}
        for trigger in so["spec"]["triggers"]:
            assert trigger["type"] == "redis-cluster-streams"
            p = keda_params(objs, trigger)
            seeds = set(zip(p["hosts"].split(","), p["ports"].split(","), strict=True))
            assert (url.hostname, str(url.port)) in seeds
            assert (p.get("enableTLS") == "true") == (url.scheme == "rediss")
            assert (p.get("username"), p.get("password")) == (url.username, url.password)
            if settings.redis_ca_file:
                assert p["ca"] == ca_seen_by_pods(deployment, settings.redis_ca_file)
            assert p["consumerGroup"] == GROUP
            seen[trigger["name"].split("-")[0]].add(p["stream"])
        assert seen == {"lag": streams, "pending": streams}
