"""The Helm chart deploys workers per (saga type, step): `types` in the values."""

from __future__ import annotations

import re
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
    validate_core,
    validate_keda,
)

FULL = f"{RELEASE}-saga"
ORDERS = {
    "types": {
        "orders": {
            "app": "shop.orders:app",
            "steps": {"router": {"timeoutSeconds": 30}, "charge": {"concurrency": 2}},
        }
    }
}


def rendered(extra: dict[str, Any]) -> list[dict[str, Any]]:
    return render(merged(merged(example("large"), {"config": {"partitions": 2}}), extra))


def test_a_type_gets_a_deployment_per_step_with_its_settings() -> None:
    """`saga worker <app> <step>` per step of the type, its own SAGA_<STEP>_* in env; the
    document pipeline's Deployments are unchanged, router included."""
    objs = rendered(ORDERS)
    deployments = of_kind(objs, "Deployment")
    assert {f"{FULL}-orders-router", f"{FULL}-orders-charge", f"{FULL}-router"} <= set(deployments)
    ctr = container(deployments[f"{FULL}-orders-router"])
    assert ctr["args"] == ["worker", "shop.orders:app", "router"]
    env = {k: v.get("value") for k, v in env_of(ctr).items()}
    assert (env["SAGA_STEP"], env["SAGA_ROUTER_TIMEOUT"]) == ("router", "30")
    charge = {
        k: v.get("value")
        for k, v in env_of(container(deployments[f"{FULL}-orders-charge"])).items()
    }
    assert charge["SAGA_CHARGE_CONCURRENCY"] == "2"
    docs = container(deployments[f"{FULL}-router"])
    assert docs["args"] == ["worker", "router"] and "SAGA_ROUTER_TIMEOUT" not in env_of(docs)
    labels = deployments[f"{FULL}-orders-router"]["spec"]["selector"]["matchLabels"]
    assert labels["app.kubernetes.io/component"] == "orders-router"
    for obj in deployments.values():
        validate_core(obj)


def test_a_types_scaledobject_watches_the_types_own_streams() -> None:
    """KEDA scales a type's step on {<type>.pN} streams, not the document pipeline's."""
    scaled = of_kind(rendered(ORDERS), "ScaledObject")
    spec = scaled[f"{FULL}-orders-router"]["spec"]
    assert spec["scaleTargetRef"]["name"] == f"{FULL}-orders-router"
    streams = {t["metadata"]["stream"] for t in spec["triggers"]}
    assert streams == {"saga:{orders.p0}:ready:router", "saga:{orders.p1}:ready:router"}
    docs = {t["metadata"]["stream"] for t in scaled[f"{FULL}-router"]["spec"]["triggers"]}
    assert docs == {"saga:{p0}:ready:router", "saga:{p1}:ready:router"}
    validate_keda(scaled[f"{FULL}-orders-router"])
    budgets = of_kind(rendered(ORDERS), "PodDisruptionBudget")
    assert f"{FULL}-orders-charge" in budgets


def test_a_types_workers_get_the_workers_network_policy() -> None:
    """The workers' egress policy selects a type's worker pods too."""
    values = merged(ORDERS, {"networkPolicy": {"enabled": True}})
    policies = of_kind(rendered(values), "NetworkPolicy")
    selector = policies[f"{FULL}-workers"]["spec"]["podSelector"]["matchExpressions"][0]
    assert {"orders-router", "orders-charge", "router"} <= set(selector["values"])


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"documents": {"app": "a:b", "steps": {"x": {}}}}, "invalid propertyName 'documents'"),
        ({"orders": {"app": "no-colon", "steps": {"x": {}}}}, "/types/orders/app"),
        ({"orders": {"app": "a:b", "steps": {}}}, "/types/orders/steps"),
        ({"Orders": {"app": "a:b", "steps": {"x": {}}}}, "invalid propertyName 'Orders'"),
    ],
    ids=["documents-is-the-default", "app-not-module-attr", "no-steps", "bad-name"],
)
def test_the_schema_refuses_a_wrong_type(bad: dict[str, Any], words: str) -> None:
    """The values schema refuses a type named documents, a bad app, no steps, a bad name."""
    with pytest.raises(Exception, match=re.escape(words)):
        rendered({"types": bad})
