"""KEDA on a Redis Cluster: the `redis-cluster-streams` triggers the chart renders (one
pair per partition) reach the Redis the workers' client reaches, with the same TLS,
credentials and CA, and watch exactly the streams and group the client reads.

The chart is rendered with Helm (tests/deploy/chart.py); the pods' environment is
resolved against a Secret and read with the real ``load_settings``, so both sides are
what would run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.connection import SSLConnection

from saga.config.settings import load_settings
from saga.state.keys import GROUP
from saga.wiring.runtime import keys_of, open_client
from tests.deploy.chart import container, env_of, example, merged, of_kind, render

pytestmark = pytest.mark.anyio

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


def mount_secrets(deployment: dict[str, Any], root: Path) -> dict[str, Path]:
    """The pod's Secret volumes written under ``root`` as the kubelet would mount them
    (each item at mountPath/path, holding the Redis Secret's value): mountPath -> the
    directory standing in for it."""
    pod, ctr = deployment["spec"]["template"]["spec"], container(deployment)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts: dict[str, Path] = {}
    for mount in ctr.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        if secret is None or secret["secretName"] != "saga-redis":
            continue
        where = root / mount["mountPath"].lstrip("/")
        where.mkdir(parents=True, exist_ok=True)
        for item in secret["items"]:
            (where / item["path"]).write_text(SECRET[item["key"]])
        mounts[mount["mountPath"]] = where
    return mounts


def in_pod(path: str, mounts: dict[str, Path]) -> str:
    """``path`` as the pod sees it, moved to where the test mounted its volume."""
    for mount_path, where in mounts.items():
        if path.startswith(mount_path + "/"):
            return str(where / path[len(mount_path) + 1 :])
    return path


def pod_settings(objs: list[dict[str, Any]], deployment: dict[str, Any], root: Path) -> Any:
    """What the worker's settings would be: its ConfigMap, then its env with
    secretKeyRefs read from the Secret and $(VAR) references expanded; the files it
    names under a mounted Secret volume exist (under ``root``), as in the pod."""
    ctr = container(deployment)
    env: dict[str, str] = {}
    for src in ctr.get("envFrom", []):
        env.update(of_kind(objs, "ConfigMap")[src["configMapRef"]["name"]]["data"])
    for name, e in env_of(ctr).items():
        raw = _secret_value(e["valueFrom"]) if "valueFrom" in e else e["value"]
        env[name] = re.sub(r"\$\(([A-Z_]+)\)", lambda m: env[m.group(1)], raw)
    mounts = mount_secrets(deployment, root)
    env = {k: in_pod(v, mounts) if k.endswith("_FILE") else v for k, v in env.items()}
    return load_settings(env), env


def keda_params(objs: list[dict[str, Any]], trigger: dict[str, Any]) -> dict[str, str]:
    """A trigger's parameters: its metadata plus its TriggerAuthentication's."""
    params = dict(trigger["metadata"])
    if "authenticationRef" in trigger:
        auth = of_kind(objs, "TriggerAuthentication")[trigger["authenticationRef"]["name"]]
        for ref in auth["spec"]["secretTargetRef"]:
            params[ref["parameter"]] = SECRET[ref["key"]]
    return params


def client_sees(settings: Any) -> tuple[Any, dict[str, Any]]:
    """The cluster client the workers open (``open_client``; nothing connects yet): its
    seed node and the arguments every node connection gets."""
    client = open_client(settings)
    (seed,) = client.nodes_manager.startup_nodes.values()
    kw = client.nodes_manager.connection_kwargs
    return client, {
        "seed": (seed.host, str(seed.port)),
        "tls": issubclass(kw["connection_class"], SSLConnection),
        "auth": (kw.get("username"), kw.get("password")),
        # what the client reads at SAGA_REDIS_CA_FILE: the Secret key mounted there
        "ca": Path(kw["ssl_ca_certs"]).read_text() if kw.get("ssl_ca_certs") else None,
    }


@pytest.mark.parametrize("variant", sorted(CLUSTER_VARIANTS))
async def test_cluster_triggers_reach_what_the_client_reaches(variant: str, tmp_path: Path) -> None:
    """Per step: the client's seed among KEDA's hosts/ports, TLS on both sides or
    neither, the same user, password and CA, one lag and one pending trigger per
    partition stream of the step, and the client's consumer group."""
    objs = render(CLUSTER_VARIANTS[variant])
    scaled = of_kind(objs, "ScaledObject")
    assert scaled
    deployments = of_kind(objs, "Deployment")
    for so in scaled.values():
        deployment = deployments[so["spec"]["scaleTargetRef"]["name"]]
        root = tmp_path / deployment["metadata"]["name"]
        settings, env = pod_settings(objs, deployment, root)
        assert settings.cluster
        client, sees = client_sees(settings)
        await client.aclose()
        keys = keys_of(settings)
        streams = {keys.ready(p, env["SAGA_STEP"]) for p in keys.all_partitions()}
        seen: dict[str, set[str]] = {"lag": set(), "pending": set()}
        for trigger in so["spec"]["triggers"]:
            assert trigger["type"] == "redis-cluster-streams"
            p = keda_params(objs, trigger)
            seeds = set(zip(p["hosts"].split(","), p["ports"].split(","), strict=True))
            assert sees["seed"] in seeds
            assert (p.get("enableTLS") == "true") == sees["tls"]
            assert (p.get("username"), p.get("password")) == sees["auth"]
            if sees["ca"]:
                assert p["ca"] == sees["ca"]
            assert p["consumerGroup"] == GROUP
            seen[trigger["name"].split("-")[0]].add(p["stream"])
        assert seen == {"lag": streams, "pending": streams}
