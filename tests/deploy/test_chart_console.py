"""The chart's optional console: off by default; on, a Deployment running `saga console`
with probes, a Service and a NetworkPolicy, valid Kubernetes, with sign-in settings."""

from __future__ import annotations

from typing import Any

from tests.deploy.chart import container, env_of, lint, render, validate_core

NAME = "rel-saga-console"


def console_objects(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    objects = render(values)
    return {o["kind"]: o for o in objects if o["metadata"]["name"] == NAME}


def test_the_console_is_off_by_default() -> None:
    """Default values render no console object."""
    assert console_objects({}) == {}


def test_the_console_renders_a_probed_deployment_a_service_and_a_network_policy() -> None:
    """Enabled: `saga console` on 0.0.0.0:8090 with /livez and /readyz probes, Redis from
    the Secret, a Service to its port, ingress only from this namespace; all valid."""
    found = console_objects({"console": {"enabled": True}})
    assert set(found) == {"Deployment", "Service", "NetworkPolicy"}
    for obj in found.values():
        validate_core(obj)
    ctr = container(found["Deployment"])
    assert ctr["args"] == ["console"]
    env = env_of(ctr)
    assert env["SAGA_CONSOLE_HOST"]["value"] == "0.0.0.0"
    assert env["SAGA_CONSOLE_PORT"]["value"] == "8090"
    assert "REDIS_URL" in env and "SAGA_CONSOLE_AUTH_HEADER" not in env
    assert ctr["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert ctr["ports"] == [{"name": "http", "containerPort": 8090, "protocol": "TCP"}]
    assert ctr["securityContext"]["readOnlyRootFilesystem"] is True
    labels = found["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "console"
    svc = found["Service"]["spec"]
    assert svc["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    assert svc["selector"]["app.kubernetes.io/component"] == "console"
    policy = found["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"] == svc["selector"]
    assert policy["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}],
                                  "from": [{"podSelector": {}}]}]  # fmt: skip


def test_forward_auth_token_file_and_allowed_peers_reach_the_pod() -> None:
    """Forward-auth headers and trusted proxies become SAGA_CONSOLE_* settings; a token
    file Secret is mounted read-only; the policy lets in exactly the peers given."""
    peers = [{"namespaceSelector": {"matchLabels": {"name": "ingress"}}}]
    values = {"console": {
        "enabled": True,
        "forwardAuth": {"userHeader": "X-Auth-Request-User", "trustedProxies": ["10.1.0.0/16"]},
        "tokenFile": {"existingSecret": "console-tokens"},
        "networkPolicy": {"from": peers},
    }}  # fmt: skip
    found = console_objects(values)
    for obj in found.values():
        validate_core(obj)
    env = env_of(container(found["Deployment"]))
    assert env["SAGA_CONSOLE_AUTH_HEADER"]["value"] == "X-Auth-Request-User"
    assert env["SAGA_CONSOLE_TRUSTED_PROXIES"]["value"] == "10.1.0.0/16"
    assert env["SAGA_CONSOLE_OPERATOR_GROUP"]["value"] == "saga-operators"
    assert env["SAGA_CONSOLE_TOKEN_FILE"]["value"] == "/etc/saga/console/tokens"
    mounts = {m["name"]: m for m in container(found["Deployment"])["volumeMounts"]}
    assert mounts["console-tokens"]["readOnly"] is True
    assert found["NetworkPolicy"]["spec"]["ingress"][0]["from"] == peers
    assert lint(values) == []


def test_the_console_secret_comes_from_a_secret() -> None:
    """SAGA_CONSOLE_SECRET is a secretKeyRef (redis.existingSecret's `console-secret` by
    default, or console.secret's), never a value; no other workload gets it."""
    env = env_of(container(console_objects({"console": {"enabled": True}})["Deployment"]))
    ref = env["SAGA_CONSOLE_SECRET"]
    assert "value" not in ref
    assert ref["valueFrom"]["secretKeyRef"] == {"name": "saga-redis", "key": "console-secret"}
    own = {"console": {"enabled": True, "secret": {"existingSecret": "console", "key": "hmac"}}}
    env = env_of(container(console_objects(own)["Deployment"]))
    assert env["SAGA_CONSOLE_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": "console",
                                                                      "key": "hmac"}  # fmt: skip
    for obj in render(own):
        if obj["metadata"]["name"] != NAME and obj["kind"] in ("Deployment", "Job"):
            assert "SAGA_CONSOLE_SECRET" not in env_of(container(obj)), obj["metadata"]["name"]
