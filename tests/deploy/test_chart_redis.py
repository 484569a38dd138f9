"""The chart reaches Redis only through the existing Secret: no credential is
ever written into a rendered object, and KEDA gets host:port, never a URL."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.deploy.chart import (
    RELEASE,
    UNCHECKED_KINDS,
    container,
    env_of,
    example,
    merged,
    of_kind,
    render,
    render_error,
    render_text,
    validate_core,
    validate_keda,
)

FULL = f"{RELEASE}-saga"
VARIANTS: dict[str, dict[str, Any]] = {
    "small": example("small"),
    "large": example("large"),
    "large-cluster": merged(example("large"), {"redis": {"cluster": True}}),
    "url-and-address": merged(
        example("small"),
        {
            "redis": {
                "existingSecret": "managed-redis",
                "secretKeys": {"url": "REDIS_URL", "host": "", "port": "", "password": ""},
                "address": "redis.example.internal:6379",
            }
        },
    ),
}
variants = pytest.mark.parametrize("variant", sorted(VARIANTS))
_REF = re.compile(r"\$\(([A-Z_]+)\)")


def workloads(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*of_kind(objs, "Deployment").values(), *of_kind(objs, "Job").values()]


@variants
def test_no_secret_value_is_inlined(variant: str) -> None:
    """Credentials reach pods only as secretKeyRef (or $(VAR) references to them)."""
    values = VARIANTS[variant]
    objs = render(values)
    assert not of_kind(objs, "Secret")
    secret = values["redis"]["existingSecret"]
    for obj in workloads(objs):
        env = env_of(container(obj))
        url = env["REDIS_URL"]
        if "valueFrom" in url:
            assert url["valueFrom"]["secretKeyRef"]["name"] == secret
            continue
        assert re.fullmatch(
            r"rediss?://(\$\(REDIS_USERNAME\))?(:\$\(REDIS_PASSWORD\))?@?"
            r"\$\(REDIS_HOST\):\$\(REDIS_PORT\)/\d+",
            url["value"],
        ), url["value"]
        names = list(env)
        for ref in _REF.findall(url["value"]):
            assert names.index(ref) < names.index("REDIS_URL"), f"{ref} defined after REDIS_URL"
            assert env[ref]["valueFrom"]["secretKeyRef"]["name"] == secret
    for trigger_auth in of_kind(objs, "TriggerAuthentication").values():
        assert set(trigger_auth["spec"]) == {"secretTargetRef"}
        assert {ref["name"] for ref in trigger_auth["spec"]["secretTargetRef"]} == {secret}
    for scaled in of_kind(objs, "ScaledObject").values():
        for trigger in scaled["spec"]["triggers"]:
            assert not {"password", "username", "url"} & set(trigger["metadata"])


@variants
def test_no_url_with_credentials_anywhere_in_the_output(variant: str) -> None:
    """No rendered text holds a redis:// URL with a literal user or password."""
    for path, text in render_text(VARIANTS[variant]).items():
        for url in re.findall(r"rediss?://[^\s\"']+", text):
            rest = url.split("//", 1)[1]
            if "@" in rest:
                userinfo = rest.split("@", 1)[0]
                assert _REF.sub("", userinfo).replace(":", "") == "", (path, url)


@variants
def test_variant_renders_valid_objects(variant: str) -> None:
    """Each connection variant still renders schema-valid core and KEDA objects."""
    for obj in render(VARIANTS[variant]):
        if obj["apiVersion"] == "keda.sh/v1alpha1":
            validate_keda(obj)
        elif obj["kind"] not in UNCHECKED_KINDS:
            validate_core(obj)


def test_keda_gets_host_and_port_from_the_secret() -> None:
    """Without redis.address the TriggerAuthentication maps the Secret's host/port keys."""
    objs = render(example("small"))
    (auth,) = of_kind(objs, "TriggerAuthentication").values()
    params = {r["parameter"]: r["key"] for r in auth["spec"]["secretTargetRef"]}
    assert params == {"host": "host", "port": "port", "password": "password"}


def test_cluster_mode_uses_the_cluster_scaler_and_seed_lists() -> None:
    """Cluster on: redis-cluster-streams triggers and hosts/ports parameters."""
    objs = render(VARIANTS["large-cluster"])
    (auth,) = of_kind(objs, "TriggerAuthentication").values()
    params = {r["parameter"] for r in auth["spec"]["secretTargetRef"]}
    assert {"hosts", "ports"} <= params
    assert not {"host", "port"} & params
    for scaled in of_kind(objs, "ScaledObject").values():
        assert {t["type"] for t in scaled["spec"]["triggers"]} == {"redis-cluster-streams"}


def test_an_address_in_values_replaces_the_secret_host() -> None:
    """With only a URL in the Secret, KEDA gets redis.address and the pods the URL key."""
    objs = render(VARIANTS["url-and-address"])
    assert not of_kind(objs, "TriggerAuthentication")
    for scaled in of_kind(objs, "ScaledObject").values():
        for trigger in scaled["spec"]["triggers"]:
            assert trigger["metadata"]["address"] == "redis.example.internal:6379"
            assert "authenticationRef" not in trigger
    for obj in workloads(objs):
        ref = env_of(container(obj))["REDIS_URL"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "managed-redis", "key": "REDIS_URL"}


def test_tls_ca_is_mounted_for_workers_and_handed_to_keda() -> None:
    """The Secret's CA key is a read-only file at SAGA_REDIS_CA_FILE and KEDA's `ca`."""
    objs = render(example("large"))
    cm = of_kind(objs, "ConfigMap")[FULL]
    ca_file = cm["data"]["SAGA_REDIS_CA_FILE"]
    for obj in workloads(objs):
        pod = obj["spec"]["template"]["spec"]
        volume = {v["name"]: v for v in pod["volumes"]}["redis-ca"]["secret"]
        assert volume["secretName"] == "saga-redis"
        assert volume["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
        mount = {m["name"]: m for m in container(obj)["volumeMounts"]}["redis-ca"]
        assert mount["readOnly"] is True
        assert ca_file == f"{mount['mountPath']}/ca.crt"
    (auth,) = of_kind(objs, "TriggerAuthentication").values()
    assert {"parameter": "ca", "name": "saga-redis", "key": "ca.crt"} in auth["spec"][
        "secretTargetRef"
    ]
    for scaled in of_kind(objs, "ScaledObject").values():
        assert {t["metadata"]["enableTLS"] for t in scaled["spec"]["triggers"]} == {"true"}


ROLE_USERS = {
    "executor": "executor-user",
    "controller": "controller-user",
    "console": "console-user",
    "init": "loader-user",
    "keda": "keda-user",
}
"""Component -> the Secret key of its own ACL user name (deploy/redis/saga-users.acl)."""


def test_each_component_connects_as_its_own_acl_user() -> None:
    """redis.users.<role>: workers, controller, helm test, console, init Job and KEDA
    each read their own user and password keys from the Secret, never another's."""
    users = {r: {"username": u, "password": f"{u}-pw"} for r, u in ROLE_USERS.items()}
    values = merged(example("small"), {"redis": {"users": users}, "console": {"enabled": True}})
    objs = render(values)
    seen = {}
    for obj in [*workloads(objs), *of_kind(objs, "Pod").values()]:
        env = env_of(container(obj))
        component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
        user = env["REDIS_USERNAME"]["valueFrom"]["secretKeyRef"]["key"]
        password = env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"]
        assert password == f"{user}-pw", obj["metadata"]["name"]
        assert "$(REDIS_USERNAME)@" in env["REDIS_URL"]["value"]
        seen.setdefault(user, set()).add(component)
    assert seen.pop("controller-user") >= {"controller"}
    assert seen.pop("console-user") == {"console"}
    assert seen.pop("loader-user") == {"init"}
    assert set(seen) == {"executor-user"}  # every step's Deployment
    (auth,) = of_kind(objs, "TriggerAuthentication").values()
    params = {r["parameter"]: r["key"] for r in auth["spec"]["secretTargetRef"]}
    assert (params["username"], params["password"]) == ("keda-user", "keda-user-pw")


def test_a_url_secret_needs_each_users_own_url() -> None:
    """With secretKeys.url, a role's own user must come as its own URL key: a user name
    alone is one sentence at render time; an own URL is what the component reads."""
    base = VARIANTS["url-and-address"]
    bad = merged(base, {"redis": {"users": {"console": {"username": "console-user"}}}})
    assert "redis.users.console: secretKeys.url is set" in render_error(bad)
    good = merged(base, {"redis": {"users": {"init": {"url": "LOADER_URL"}}}})
    (job,) = of_kind(render(good), "Job").values()
    assert env_of(container(job))["REDIS_URL"]["valueFrom"]["secretKeyRef"]["key"] == "LOADER_URL"
