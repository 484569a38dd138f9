"""Wiring from settings: the Redis client (embedded server when REDIS_URL is unset),
the document pipeline with its overrides, and the ports each attempt gets."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from saga.adapters.embedded_redis import EmbeddedServer
from saga.pipeline import Pipeline, StepSpec, discovered_registrations, with_registrations
from saga.retry import RetryPolicy
from saga.settings import Settings
from saga.state.connection import connect
from saga.state.keys import Keys

# Defaults per step: the parser calls an LLM and may be slow; the others are quick.
_STEP_DEFAULTS: dict[str, dict[str, Any]] = {
    "router": {"timeout_s": 120.0, "lease_s": 60.0, "concurrency": 8, "max_attempts": 5},
    "parser": {"timeout_s": 600.0, "lease_s": 120.0, "concurrency": 4, "max_attempts": 5},
    "grouper": {"timeout_s": 300.0, "lease_s": 60.0, "concurrency": 8, "max_attempts": 5},
}


def keys_of(settings: Settings) -> Keys:
    return Keys(prefix=settings.key_prefix, partitions=settings.partitions)


def embedded_server(settings: Settings) -> EmbeddedServer:
    return EmbeddedServer(data_dir=settings.data_dir, tied=False, malloc=settings.embedded_malloc)


def ensure_embedded(settings: Settings) -> EmbeddedServer:
    """Start the embedded server under the data dir unless it already runs (reused by
    every later command). A file lock keeps two shells from starting two servers."""
    server = embedded_server(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.data_dir / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not server.running():
            server.start()
    return server


def redis_url(settings: Settings) -> str:
    if settings.redis_url:
        return settings.redis_url
    return ensure_embedded(settings).url


def open_client(settings: Settings) -> Any:
    options: dict[str, Any] = {}
    if settings.redis_ca_file:
        options["ssl_ca_certs"] = settings.redis_ca_file
    url = redis_url(settings)
    # A password in the URL wins; REDIS_PASSWORD (a Secret key in Kubernetes) fills in
    # when the URL has none, so it never has to be spliced (and percent-encoded) into it.
    if settings.redis_password and settings.redis_url and not urlsplit(url).password:
        options["password"] = settings.redis_password
    return connect(url, cluster=settings.cluster, **options)


@contextlib.asynccontextmanager
async def client_for(settings: Settings) -> AsyncIterator[Any]:
    from saga.state.partitions import guard

    client = open_client(settings)
    try:
        await guard(client, keys_of(settings))  # SAGA_PARTITIONS as stored, or refuse
        yield client
    finally:
        await client.aclose()


def document_pipeline(settings: Settings) -> Pipeline:
    """router → parser → grouper, plus steps from entry points, with SAGA_<STEP>_* applied.
    ``SAGA_PIPELINE=module:function`` replaces the document pipeline with another one."""
    if settings.pipeline:
        return apply_overrides(custom_pipeline(settings.pipeline), settings)
    from saga.steps.pipeline_steps import STEPS

    specs = []
    for d in STEPS:
        base = _STEP_DEFAULTS.get(d.name, {})
        specs.append(
            StepSpec(
                name=d.name,
                fn=d.fn,
                input_type=d.input_type,
                output_type=d.output_type,
                loads_pages=d.loads_pages,
                deletes_pages=d.deletes_pages,
                timeout_s=base.get("timeout_s", 300.0),
                lease_s=base.get("lease_s", 60.0),
                concurrency=base.get("concurrency", 8),
                retry=RetryPolicy(max_attempts=base.get("max_attempts", 5)),
            )
        )
    pipeline = with_registrations(Pipeline(tuple(specs)), discovered_registrations())
    return apply_overrides(pipeline, settings)


def custom_pipeline(ref: str) -> Pipeline:
    import importlib

    from saga.settings import SettingsError

    module, _, attr = ref.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise SettingsError(
            f"SAGA_PIPELINE={ref!r} does not name module:function ({exc})"
        ) from None
    pipeline = factory() if callable(factory) else factory
    if not isinstance(pipeline, Pipeline):
        raise SettingsError(f"SAGA_PIPELINE={ref!r} did not give a Pipeline")
    return pipeline


def apply_overrides(pipeline: Pipeline, settings: Settings) -> Pipeline:
    def override(spec: StepSpec) -> StepSpec:
        o = settings.for_step(spec.name)
        retry = spec.retry
        if o.max_attempts:
            retry = replace(retry, max_attempts=o.max_attempts)
        if o.max_lease_expiries:
            retry = replace(retry, max_lease_expiries=o.max_lease_expiries)
        if o.backoff_s:
            retry = replace(retry, base_s=o.backoff_s)
        return replace(
            spec,
            retry=retry,
            concurrency=o.concurrency or spec.concurrency,
            timeout_s=o.timeout_s or spec.timeout_s,
            lease_s=o.lease_s or spec.lease_s,
        )

    return pipeline.with_overrides(override)
