"""The chart, rendered offline by Helm with every example values file, is valid
Kubernetes and KEDA and deploys exactly the runtime contract of `saga worker`."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.deploy.chart import (
    EXAMPLES,
    NAMESPACE,
    RELEASE,
    UNCHECKED_KINDS,
    container,
    env_of,
    example,
    lint,
    merged,
    of_kind,
    render,
    validate_core,
    validate_keda,
)

# name -> (values, enabled steps, partitions, cluster mode)
CASES: dict[str, tuple[dict[str, Any], set[str], int, bool]] = {
    "defaults": ({}, {"router", "parser", "grouper"}, 1, False),
    "small": (example("small"), {"router", "parser", "grouper"}, 1, False),
    "large": (example("large"), {"router", "parser", "enricher", "grouper"}, 4, False),
    "chunked": (
        example("chunked"),
        {"router", "plan", "parse_chunk", "merge", "grouper", "parser"},
        1,
        False,
    ),
    "large-cluster": (
        merged(example("large"), {"redis": {"cluster": True}}),
        {"router", "parser", "enricher", "grouper"},
        4,
        True,
    ),
}
case_names = pytest.mark.parametrize("case", sorted(CASES))

# Trigger metadata is a free string map in KEDA's CRD, so the CRD check cannot
# catch a misspelt parameter: these are the parameters KEDA's redis-streams and
# redis-cluster-streams scalers read (pkg/scalers/redis_*.go).
_COMMON = {
    "stream",
    "consumerGroup",
    "lagCount",
    "activationLagCount",
    "pendingEntriesCount",
    "streamLength",
    "enableTLS",
    "unsafeSsl",
    "username",
    "usernameFromEnv",
    "passwordFromEnv",
}
KEDA_PARAMS = {
    "redis-streams": _COMMON
    | {"address", "host", "port", "addressFromEnv", "hostFromEnv", "portFromEnv", "databaseIndex"},
    "redis-cluster-streams": _COMMON
    | {"addresses", "hosts", "ports", "addressesFromEnv", "hostsFromEnv", "portsFromEnv"},
}
FULL = f"{RELEASE}-saga"


def named(step: str) -> str:
    """A step's object name: Kubernetes names take no ``_`` (``parse_chunk``)."""
    return f"{FULL}-{step.replace('_', '-')}"


def objects(case: str) -> list[dict[str, Any]]:
    return render(CASES[case][0])


def settings(objs: list[dict[str, Any]]) -> dict[str, str]:
    cm = of_kind(objs, "ConfigMap")[FULL]
    return cm["data"]


def test_every_example_file_has_a_case() -> None:
    """Each file in examples/ is rendered and checked by this module."""
    assert {p.stem for p in EXAMPLES.glob("*.yaml")} <= set(CASES)


@case_names
def test_chart_lints_clean(case: str) -> None:
    """`helm lint --strict` finds no warning or error."""
    assert lint(CASES[case][0]) == []


@case_names
def test_core_objects_valid_against_kubernetes_schemas(case: str) -> None:
    """Every core object validates strictly against the Kubernetes OpenAPI schemas."""
    core = [o for o in objects(case) if o["apiVersion"] != "keda.sh/v1alpha1"]
    assert core
    for obj in core:
        if obj["kind"] not in UNCHECKED_KINDS:
            validate_core(obj)


@case_names
def test_keda_objects_valid_against_crds(case: str) -> None:
    """ScaledObjects and the TriggerAuthentication validate strictly against KEDA's CRDs."""
    keda = [o for o in objects(case) if o["apiVersion"] == "keda.sh/v1alpha1"]
    assert {o["kind"] for o in keda} == {"ScaledObject", "TriggerAuthentication"}
    for obj in keda:
        validate_keda(obj)


def test_strict_crd_validation_rejects_unknown_fields() -> None:
    """The CRD check is strict: an unknown field in a trigger fails it."""
    scaled = next(iter(of_kind(objects("small"), "ScaledObject").values()))
    scaled["spec"]["triggers"][0]["lagCount"] = "5"
    with pytest.raises(AssertionError, match="lagCount"):
        validate_keda(scaled)


@case_names
def test_each_step_has_a_deployment_running_it(case: str) -> None:
    """One Deployment per enabled step, running `saga worker <step>`."""
    _, steps, _, _ = CASES[case]
    deployments = of_kind(objects(case), "Deployment")
    assert set(deployments) == {named(s) for s in steps} | {f"{FULL}-controller"}
    for step in steps:
        ctr = container(deployments[named(step)])
        assert ctr["args"] == ["worker", step]
        assert env_of(ctr)["SAGA_STEP"]["value"] == step
        names = [e["name"] for e in ctr["env"]]
        assert len(names) == len(set(names)), names  # a step's own entry replaces the chart's
        pipeline = env_of(ctr).get("SAGA_PIPELINE", {}).get("value")
        if case == "chunked":  # parser drains on the default pipeline, the rest: chunked
            assert pipeline == ("" if step == "parser" else "saga.documents.chunked:app")
        assert ctr["envFrom"][0] == {"configMapRef": {"name": FULL}}


@case_names
def test_each_step_has_a_scaledobject_on_its_streams(case: str) -> None:
    """Per step and partition: a lag trigger that wakes from zero and a pending trigger."""
    _, steps, partitions, cluster = CASES[case]
    scaled = of_kind(objects(case), "ScaledObject")
    assert set(scaled) == {named(s) for s in steps}
    kind = "redis-cluster-streams" if cluster else "redis-streams"
    for step in steps:
        spec = scaled[named(step)]["spec"]
        assert spec["scaleTargetRef"]["name"] == named(step)
        assert spec["minReplicaCount"] <= spec["maxReplicaCount"]
        lag = {t["metadata"]["stream"]: t for t in spec["triggers"] if "lagCount" in t["metadata"]}
        pending = {
            t["metadata"]["stream"]: t
            for t in spec["triggers"]
            if "pendingEntriesCount" in t["metadata"]
        }
        streams = {f"saga:{{p{p}}}:ready:{step}" for p in range(partitions)}
        assert set(lag) == set(pending) == streams
        assert len(spec["triggers"]) == 2 * partitions
        for trigger in spec["triggers"]:
            assert trigger["type"] == kind
            assert set(trigger["metadata"]) <= KEDA_PARAMS[kind], trigger["metadata"]
            assert trigger["metadata"]["consumerGroup"] == "executors"
            assert trigger["authenticationRef"] == {"name": f"{FULL}-redis"}
        for trigger in lag.values():
            assert "activationLagCount" in trigger["metadata"]
            assert "pendingEntriesCount" not in trigger["metadata"]


@case_names
def test_probes_hit_the_health_server(case: str) -> None:
    """Startup and liveness probe /livez, readiness /readyz, on SAGA_HEALTH_PORT."""
    objs = objects(case)
    port = int(settings(objs)["SAGA_HEALTH_PORT"])
    for dep in of_kind(objs, "Deployment").values():
        ctr = container(dep)
        assert ctr["ports"] == [{"name": "health", "containerPort": port, "protocol": "TCP"}]
        for probe, path in [
            ("startupProbe", "/livez"),
            ("livenessProbe", "/livez"),
            ("readinessProbe", "/readyz"),
        ]:
            assert ctr[probe]["httpGet"] == {"path": path, "port": "health"}
        # The probes come to the pod's IP: the health server must bind every address.
        loaded = [e["configMapRef"]["name"] for e in ctr["envFrom"] if "configMapRef" in e]
        assert FULL in loaded
        assert "SAGA_HEALTH_HOST" not in env_of(ctr)  # the ConfigMap's value is the one
        assert settings(objs)["SAGA_HEALTH_HOST"] == "0.0.0.0"


@case_names
def test_grace_period_is_the_drain_plus_the_margin(case: str) -> None:
    """Each worker drains for SAGA_DRAIN_SECONDS (by default its step's timeout, so a step
    started just before SIGTERM can finish) and gets that plus the margin as grace."""
    values = CASES[case][0]
    objs = objects(case)
    config = settings(objs)
    margin = values.get("terminationGraceMarginSeconds", 15)
    for step in CASES[case][1]:
        dep = of_kind(objs, "Deployment")[named(step)]
        drain = int(env_of(container(dep))["SAGA_DRAIN_SECONDS"]["value"])
        own = {**values.get("stepDefaults", {}), **values.get("steps", {}).get(step, {})}
        if "drainSeconds" not in own and "drainSeconds" not in values.get("config", {}):
            assert drain == int(config[f"SAGA_{step.upper()}_TIMEOUT"]), step
        assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == drain + margin
    assert "SAGA_DRAIN_SECONDS" not in config


@case_names
def test_per_step_settings_reach_the_configmap(case: str) -> None:
    """Each step's concurrency, attempts, timeout and lease are SAGA_<STEP>_* settings."""
    config = settings(objects(case))
    for step in CASES[case][1]:
        for suffix in ("CONCURRENCY", "MAX_ATTEMPTS", "TIMEOUT", "LEASE", "BACKOFF"):
            assert int(config[f"SAGA_{step.upper()}_{suffix}"]) >= 1
    assert config["SAGA_PARTITIONS"] == str(CASES[case][2])
    assert config["SAGA_REDIS_CLUSTER"] == str(CASES[case][3]).lower()


@case_names
def test_a_disruption_budget_per_step(case: str) -> None:
    """Each step has a PodDisruptionBudget selecting exactly its pods."""
    objs = objects(case)
    budgets = of_kind(objs, "PodDisruptionBudget")
    for name, dep in of_kind(objs, "Deployment").items():
        selector = budgets[name]["spec"]["selector"]
        assert selector == dep["spec"]["selector"]
        assert budgets[name]["spec"]["maxUnavailable"] == 1


@case_names
def test_pods_are_locked_down(case: str) -> None:
    """Non-root, no escalation, read-only root, no capabilities, RuntimeDefault seccomp."""
    objs = objects(case)
    workloads = [*of_kind(objs, "Deployment").values(), *of_kind(objs, "Job").values()]
    for obj in [*workloads, *of_kind(objs, "Pod").values()]:
        pod = obj["spec"]["template"]["spec"] if obj["kind"] != "Pod" else obj["spec"]
        ctr = container(obj)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        sc = ctr["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"] == {"drop": ["ALL"]}
        tmp = {v["name"]: v for v in pod["volumes"]}["tmp"]
        assert "emptyDir" in tmp
        assert {"name": "tmp", "mountPath": "/tmp"} in ctr["volumeMounts"]


@case_names
def test_init_hook_runs_saga_init_before_install_and_upgrade(case: str) -> None:
    """A pre-install/pre-upgrade hook Job runs `saga init` with the workers' settings."""
    objs = objects(case)
    (job,) = of_kind(objs, "Job").values()
    hooks = job["metadata"]["annotations"]["helm.sh/hook"].split(",")
    assert sorted(hooks) == ["pre-install", "pre-upgrade"]
    ctr = container(job)
    assert ctr["args"] == ["init"]
    env = env_of(ctr)
    for key, value in settings(objs).items():
        assert env[key]["value"] == value
    assert "REDIS_URL" in env


def test_servicemonitor_scrapes_metrics_of_every_step() -> None:
    """With the ServiceMonitor on, each step's Service exposes the health port for /metrics."""
    objs = objects("large")
    (monitor,) = of_kind(objs, "ServiceMonitor").values()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "health"
    assert endpoint["path"] == "/metrics"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    wanted = monitor["spec"]["selector"]["matchLabels"]
    services = of_kind(objs, "Service")
    assert set(services) == set(of_kind(objs, "Deployment"))
    for name, svc in services.items():
        assert wanted.items() <= svc["metadata"]["labels"].items()
        assert svc["spec"]["ports"][0]["targetPort"] == "health"
        pod_labels = of_kind(objs, "Deployment")[name]["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= pod_labels.items()


def test_keda_off_renders_plain_replicas() -> None:
    """With KEDA off the Deployments carry `replicas` and no KEDA object is rendered."""
    values = merged(
        example("small"), {"keda": {"enabled": False}, "steps": {"parser": {"replicas": 3}}}
    )
    objs = render(values)
    assert not [o for o in objs if o["apiVersion"].startswith("keda.sh")]
    deployments = of_kind(objs, "Deployment")
    assert deployments[f"{FULL}-parser"]["spec"]["replicas"] == 3
    assert deployments[f"{FULL}-router"]["spec"]["replicas"] == 1


def test_a_step_can_be_switched_off() -> None:
    """`enabled: false` removes a step's Deployment, ScaledObject and settings."""
    objs = render(merged(example("small"), {"steps": {"grouper": {"enabled": False}}}))
    assert f"{FULL}-grouper" not in of_kind(objs, "Deployment")
    assert f"{FULL}-grouper" not in of_kind(objs, "ScaledObject")
    assert not [k for k in settings(objs) if re.match("SAGA_GROUPER_", k)]


def test_the_fetch_policy_is_strict_unless_values_widen_it() -> None:
    """By default pods read no local file and only documentSource's prefix; listed roots,
    prefixes and networks reach the ConfigMap as SAGA_DOCUMENT_* lists."""
    strict = settings(render({}))
    assert strict["SAGA_DOCUMENT_ROOTS"] == "none"
    assert "SAGA_DOCUMENT_URL_PREFIXES" not in strict and "SAGA_DOCUMENT_NETWORKS" not in strict
    widened = settings(
        render(
            {
                "config": {
                    "documentUrlPrefixes": ["https://bucket.s3.example/reports/"],
                    "documentRoots": ["/data/a", "/data/b"],
                    "documentNetworks": ["10.0.0.0/8", "fd00::/8"],
                }
            }
        )
    )
    assert widened["SAGA_DOCUMENT_ROOTS"] == "/data/a,/data/b"
    assert widened["SAGA_DOCUMENT_URL_PREFIXES"] == "https://bucket.s3.example/reports/"
    assert widened["SAGA_DOCUMENT_NETWORKS"] == "10.0.0.0/8,fd00::/8"


def _streams(scaled: dict[str, Any], name: str) -> dict[str, set[str]]:
    """Trigger name -> stream of one ScaledObject."""
    spec = scaled[f"{FULL}-{name}"]["spec"]
    validate_keda(scaled[f"{FULL}-{name}"])
    for trigger in spec["triggers"]:
        assert set(trigger["metadata"]) <= KEDA_PARAMS[trigger["type"]], trigger["metadata"]
    return {t["name"]: t["metadata"]["stream"] for t in spec["triggers"]}


def test_a_step_with_a_compensation_also_scales_on_its_undo_stream() -> None:
    """publish (with config.resultsUrl) and a type's step marked compensable: a lag and a
    pending trigger per partition on undo:<step> too, beside the step's own; others not."""
    orders = {"app": "shop.orders:app", "steps": {"reserve": {"compensable": True}, "charge": {}}}
    values = merged(
        example("large"),
        {"config": {"resultsUrl": "https://results.example/in"}, "steps": {"publish": {}},
         "types": {"orders": orders}},
    )  # fmt: skip
    scaled = of_kind(render(values), "ScaledObject")
    publish = _streams(scaled, "publish")
    assert len(publish) == 4 * 4
    for p in range(4):
        assert publish[f"lag-p{p}"] == publish[f"pending-p{p}"] == f"saga:{{p{p}}}:ready:publish"
        undo = f"saga:{{p{p}}}:ready:undo:publish"
        assert publish[f"undo-lag-p{p}"] == publish[f"undo-pending-p{p}"] == undo
    reserve = _streams(scaled, "orders-reserve")
    assert reserve["undo-lag-p0"] == "saga:{orders.p0}:ready:undo:reserve"
    assert not any(n.startswith("undo-") for n in _streams(scaled, "orders-charge"))
    assert not any(n.startswith("undo-") for n in _streams(scaled, "router"))
    # Without a results endpoint the pipeline has no publish step, so no undo to wait for.
    no_url = merged(example("large"), {"steps": {"publish": {}}})
    assert not any(
        n.startswith("undo-") for n in _streams(of_kind(render(no_url), "ScaledObject"), "publish")
    )
