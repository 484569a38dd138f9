"""The chart's controller, helm test, NetworkPolicies, KEDA fallback and cooldown, drain
and grace, and the Redis password: rendered offline and checked against the runtime."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.deploy.chart import (
    RELEASE,
    container,
    env_of,
    example,
    merged,
    of_kind,
    render,
    render_error,
    validate_core,
)

FULL = f"{RELEASE}-saga"
COMPONENT = "app.kubernetes.io/component"


def small(**override: Any) -> dict[str, Any]:
    return merged(example("small"), override)


def test_controller_runs_with_the_workers_settings() -> None:
    """One `saga controller` pod with the workers' ConfigMap, Redis env and health probes."""
    objs = render(small())
    deployments = of_kind(objs, "Deployment")
    ctl = deployments[f"{FULL}-controller"]
    assert ctl["spec"]["replicas"] == 1
    c = container(ctl)
    assert c["args"] == ["controller"]
    worker = container(deployments[f"{FULL}-router"])
    assert c["envFrom"] == worker["envFrom"]
    redis_env = {k: v for k, v in env_of(worker).items() if k.startswith("REDIS_")}
    assert {k: v for k, v in env_of(c).items() if k.startswith("REDIS_")} == redis_env
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert "SAGA_STEP" not in env_of(c)
    assert f"{FULL}-controller" in of_kind(objs, "PodDisruptionBudget")


def test_controller_can_be_switched_off() -> None:
    """controller.enabled false: no controller Deployment, budget or Service."""
    objs = render(small(controller={"enabled": False}, metrics={"service": {"enabled": True}}))
    for kind in ("Deployment", "PodDisruptionBudget", "Service"):
        assert f"{FULL}-controller" not in of_kind(objs, kind), kind


def test_helm_test_pod_runs_the_check() -> None:
    """A test-hook Pod runs `saga controller --check` with the release's settings."""
    objs = render(small())
    (pod,) = of_kind(objs, "Pod").values()
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never"
    c = container(pod)
    assert c["args"] == ["controller", "--check"]
    assert c["envFrom"][0] == {"configMapRef": {"name": FULL}}
    assert "REDIS_URL" in env_of(c) and "REDIS_PASSWORD" in env_of(c)


def test_network_policies_limit_every_pod_and_open_only_what_values_list() -> None:
    """Default on: all pods reach DNS and Redis only, accept only the health port from the
    metrics namespaces; workers alone get the named outside services."""
    egress = {"llm": {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}}
    objs = render(small(networkPolicy={"egress": egress}))
    policies = of_kind(objs, "NetworkPolicy")
    base, workers = policies[FULL], policies[f"{FULL}-workers"]
    for policy in (base, workers):
        validate_core(policy)
    assert base["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert base["spec"]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "saga", "app.kubernetes.io/instance": RELEASE}
    }
    (ingress,) = base["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "health", "protocol": "TCP"}]
    assert ingress["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    ports = sorted((p["port"], p["protocol"]) for r in base["spec"]["egress"] for p in r["ports"])
    assert ports == [(53, "TCP"), (53, "UDP"), (6379, "TCP")]
    (selector,) = workers["spec"]["podSelector"]["matchExpressions"]
    assert (selector["key"], selector["operator"]) == (COMPONENT, "In")
    assert sorted(selector["values"]) == ["grouper", "parser", "router"]
    assert workers["spec"]["egress"] == [{"ports": [{"port": 443}], **egress["llm"]}]
    assert not of_kind(render(small(networkPolicy={"enabled": False})), "NetworkPolicy")


def test_every_pod_is_under_the_base_policy() -> None:
    """The base policy's selector matches the workers, the controller, the hook and the test."""
    objs = render(small())
    wanted = of_kind(objs, "NetworkPolicy")[FULL]["spec"]["podSelector"]["matchLabels"]
    pods = [o["spec"]["template"]["metadata"] for o in of_kind(objs, "Deployment").values()]
    pods += [o["spec"]["template"]["metadata"] for o in of_kind(objs, "Job").values()]
    pods += [o["metadata"] for o in of_kind(objs, "Pod").values()]
    assert len(pods) == 6  # three steps, the controller, init, test
    for meta in pods:
        assert wanted.items() <= meta["labels"].items(), meta["labels"]


def test_scaledobjects_have_fallback_and_initial_cooldown() -> None:
    """KEDA holds `fallback.replicas` when Redis cannot be read, and waits before the
    first scale to zero."""
    objs = render(small(stepDefaults={"keda": {"fallback": {"replicas": 2}}}))
    for scaled in of_kind(objs, "ScaledObject").values():
        spec = scaled["spec"]
        assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2}
        assert spec["initialCooldownPeriod"] == 120


def test_cooldown_shorter_than_the_longest_backoff_fails_in_words() -> None:
    """A step that scales to zero before its last retry is due fails the render."""
    values = small(steps={"parser": {"maxAttempts": 10, "keda": {"cooldownSeconds": 300}}})
    message = render_error(values)
    assert "steps.parser.keda.cooldownSeconds (300) is shorter" in message
    assert "(330 s" in message  # min(2^9 x 2, 300) + 10%
    render(small(steps={"parser": {"maxAttempts": 10, "keda": {"cooldownSeconds": 330}}}))
    render(small(steps={"parser": {"maxAttempts": 10, "keda": {"minReplicas": 1}}}))


@pytest.mark.parametrize(
    ("override", "router", "parser"),
    [
        ({}, 120, 600),
        ({"config": {"drainSeconds": 45}}, 45, 45),
        ({"config": {"drainSeconds": 45}, "steps": {"parser": {"drainSeconds": 700}}}, 45, 700),
    ],
)
def test_drain_follows_the_timeout_unless_set(
    override: dict[str, Any], router: int, parser: int
) -> None:
    """SAGA_DRAIN_SECONDS: the step's own, else config's, else its timeout; grace = drain + 15."""
    objs = render(merged({}, override))
    for step, drain in (("router", router), ("parser", parser)):
        dep = of_kind(objs, "Deployment")[f"{FULL}-{step}"]
        assert env_of(container(dep))["SAGA_DRAIN_SECONDS"]["value"] == str(drain)
        assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == drain + 15


def test_password_is_its_own_variable_and_never_in_the_url() -> None:
    """REDIS_PASSWORD comes from the Secret key; the built URL names host, port and user."""
    objs = render(merged(example("large"), {"redis": {"secretKeys": {"url": ""}}}))
    for dep in of_kind(objs, "Deployment").values():
        env = env_of(container(dep))
        ref = env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "saga-redis", "key": "password"}
        url = env["REDIS_URL"]["value"]
        assert url == "rediss://$(REDIS_USERNAME)@$(REDIS_HOST):$(REDIS_PORT)/0"


def test_a_step_cannot_take_a_component_name() -> None:
    """A step called `controller` would collide with the controller's objects: refused."""
    assert "names a component of the chart" in render_error(small(steps={"controller": {}}))


def test_dashboard_configmap_for_the_sidecar() -> None:
    """The dashboard ConfigMap carries the sidecar label and valid JSON with top N users."""
    objs = render(small(metrics={"dashboard": {"enabled": True, "topUsers": 7}}))
    cm = of_kind(objs, "ConfigMap")[f"{FULL}-dashboard"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["saga.json"])
    (top,) = [v for v in dashboard["templating"]["list"] if v["name"] == "top_users"]
    assert top["query"] == "7" and top["current"]["value"] == "7"
    assert "__TOP_USERS__" not in cm["data"]["saga.json"]


def test_prometheus_rule_has_every_alert() -> None:
    """The opt-in PrometheusRule lists the alerts the runbooks answer."""
    objs = render(small(metrics={"prometheusRule": {"enabled": True}}))
    (rule,) = of_kind(objs, "PrometheusRule").values()
    (group,) = rule["spec"]["groups"]
    names = {r["alert"] for r in group["rules"]}
    assert names == {
        "SagaDeadLettersGrowing",
        "SagaOldestEntryTooOld",
        "SagaCircuitOpen",
        "SagaEntriesWithoutWorker",
        "SagaEndToEndSlow",
        "SagaProcessRestarting",
        "SagaReviewBacklogOld",
        "SagaControllerAbsent",
    }
    for r in group["rules"]:
        assert 'namespace="saga"' in r["expr"], r["expr"]
        assert r["labels"]["severity"] in {"warning", "critical"}


def test_the_controller_archives_and_the_workers_leave_the_sweep_to_it() -> None:
    """controller.archive: the controller mounts a claim at SAGA_ARCHIVE_DIR and is
    replaced, not surged; every worker has SAGA_RETENTION_SWEEP=off; off: neither."""
    objs = render(small(controller={"archive": {"enabled": True, "size": "5Gi"}}))
    for obj in objs:
        if obj["kind"] in ("Deployment", "PersistentVolumeClaim"):
            validate_core(obj)
    deployments = of_kind(objs, "Deployment")
    ctl = deployments[f"{FULL}-controller"]
    c = container(ctl)
    assert env_of(c)["SAGA_ARCHIVE_DIR"]["value"] == "/var/lib/saga/archive"
    mount = next(m for m in c["volumeMounts"] if m["name"] == "archive")
    assert mount["mountPath"] == "/var/lib/saga/archive"
    volume = next(v for v in ctl["spec"]["template"]["spec"]["volumes"] if v["name"] == "archive")
    claim = of_kind(objs, "PersistentVolumeClaim")[f"{FULL}-archive"]
    assert volume["persistentVolumeClaim"]["claimName"] == f"{FULL}-archive"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert ctl["spec"]["strategy"] == {"type": "Recreate"}
    workers = [d for name, d in deployments.items() if name != f"{FULL}-controller"]
    assert workers and all(
        env_of(container(w))["SAGA_RETENTION_SWEEP"]["value"] == "off" for w in workers
    )

    plain = of_kind(render(small()), "Deployment")
    assert all("SAGA_RETENTION_SWEEP" not in env_of(container(d)) for d in plain.values())
    assert "SAGA_ARCHIVE_DIR" not in env_of(container(plain[f"{FULL}-controller"]))
    existing = render(small(controller={"archive": {"enabled": True, "existingClaim": "audit"}}))
    assert not of_kind(existing, "PersistentVolumeClaim")
    off = small(controller={"enabled": False, "archive": {"enabled": True}})
    assert "needs the controller" in render_error(off)
