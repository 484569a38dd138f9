"""Wiring from settings: the Redis client (embedded server when REDIS_URL is unset),
the keys of a saga type, and the pipeline a process serves (the document pipeline,
or the App named by ``module:attr``) with its overrides."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from saga.adapters.embedded_redis import EmbeddedServer
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.keys import DEFAULT_TYPE, Keys

if TYPE_CHECKING:  # imported where used: `saga show` and `saga list` need no pipeline
    from saga.api.pipeline import Pipeline


def keys_of(settings: Settings, saga_type: str = DEFAULT_TYPE) -> Keys:
    """The keys of one saga type (the document pipeline's by default), sealing patient
    data with ``SAGA_DATA_KEYS`` / ``SAGA_DATA_KEY`` when set."""
    from saga.state.sealing import sealer_of

    sealer = sealer_of(settings.data_key, settings.data_keys)
    return Keys(
        prefix=settings.key_prefix,
        partitions=settings.partitions,
        saga_type=saga_type,
        sealer=sealer,
    )


def embedded_server(settings: Settings) -> EmbeddedServer:
    # fsync durability is sound only under appendfsync always (state/durability.py).
    return EmbeddedServer(
        data_dir=settings.data_dir,
        tied=False,
        malloc=settings.embedded_malloc,
        appendfsync="always" if settings.limits.commit_fsync else "everysec",
    )


def ensure_embedded(settings: Settings) -> EmbeddedServer:
    """Start the embedded server under the data dir unless it already runs (reused by
    every later command). A file lock keeps two shells from starting two servers."""
    server = embedded_server(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.data_dir / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not server.running():
            server.start()
        elif settings.limits.commit_fsync:
            _fsync_always(server)
    return server


def _fsync_always(server: EmbeddedServer) -> None:
    """A running embedded server started for ``local`` (``everysec``), now asked for
    ``fsync`` durability: switch it to ``always`` (it stays so until it restarts),
    rather than refuse with a sentence about a server the user never configured."""
    import redis

    client = redis.Redis(unix_socket_path=str(server.socket_path), socket_timeout=5)
    try:
        client.config_set("appendfsync", "always")
    finally:
        client.close()


def redis_url(settings: Settings) -> str:
    if settings.redis_url:
        return settings.redis_url
    return ensure_embedded(settings).url


def open_client(settings: Settings) -> Any:
    options: dict[str, Any] = {"socket_timeout": settings.redis_timeout_s}
    if settings.redis_ca_file:
        options["ssl_ca_certs"] = settings.redis_ca_file
    if settings.redis_cert_file:
        options["ssl_certfile"] = settings.redis_cert_file
        options["ssl_keyfile"] = settings.redis_key_file
    url = redis_url(settings)
    # A password in the URL wins; REDIS_PASSWORD (a Secret key in Kubernetes) fills in
    # when the URL has none, so it never has to be spliced (and percent-encoded) into it.
    if settings.redis_password and settings.redis_url and not urlsplit(url).password:
        options["password"] = settings.redis_password
    return connect(url, cluster=settings.cluster, **options)


@contextlib.asynccontextmanager
async def client_for(settings: Settings, *, migrating: bool = False) -> AsyncIterator[Any]:
    from saga.state.durability import check_durability
    from saga.state.partitions import guard

    client = open_client(settings)
    try:
        # SAGA_PARTITIONS and the schema version as stored, or refuse (``migrating``:
        # `saga migrate` runs on an older schema, to move it forward)
        await guard(client, keys_of(settings), migrating=migrating)
        await check_durability(client, settings.limits)  # fsync: WAITAOF and AOF, or refuse
        yield client
    finally:
        await client.aclose()


def document_pipeline(settings: Settings) -> Pipeline:
    """This deployment's saga type: the document pipeline (``saga.documents.pipeline``, type
    ``documents``) plus steps from entry points, with SAGA_<STEP>_* applied; or, with
    ``SAGA_PIPELINE=module:attr``, the App or Pipeline it names."""
    if settings.pipeline:
        return load_pipeline(settings.pipeline, settings, what="SAGA_PIPELINE")
    from saga.api.pipeline import apply_overrides, discovered_registrations, with_registrations

    pipeline = with_registrations(_documents_app().build(), discovered_registrations())
    if settings.results_url:  # the optional fourth step
        from saga.documents.publish import with_publish

        pipeline = with_publish(pipeline, settings.results_url, settings.review_before_publish)
    return apply_overrides(pipeline, settings)


DOCUMENTS_APP = "saga.documents.pipeline:app"
"""The document pipeline's App, named as SAGA_PIPELINE names any other: by reference,
so this wiring (which ``SagaClient.from_settings`` and ``App.client`` use) imports no
App and the public API stays free of circles (tests/test_import_graph.py)."""


def _documents_app() -> Any:
    import importlib

    module, _, attr = DOCUMENTS_APP.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_pipeline(ref: str, settings: Settings, *, what: str = "the app") -> Pipeline:
    """``module:attr`` naming a ``saga.App``, a ``Pipeline``, or a function returning
    either, as a checked pipeline with SAGA_<STEP>_* applied. The current directory is
    searched first, as for ``python -m``. Raises SettingsError in one sentence."""
    import importlib
    import os
    import sys

    from saga.api.pipeline import AppError, Pipeline, PipelineSource, apply_overrides
    from saga.config.settings import SettingsError

    module, _, attr = ref.partition(":")
    if not module or not attr:
        raise SettingsError(f"{what} {ref!r} must be module:attribute, e.g. myapp:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise SettingsError(f"{what} {ref!r} does not name module:attribute ({exc})") from None
    try:
        if callable(target) and not isinstance(target, type | Pipeline | PipelineSource):
            target = target()  # a factory function
        if isinstance(target, PipelineSource) and not isinstance(target, type | Pipeline):
            return target.pipeline(settings)  # a saga.App
    except AppError as exc:
        raise SettingsError(f"{what} {ref!r}: {exc}") from None
    except Exception as exc:  # the factory's own failure, in one sentence at start-up
        raise SettingsError(f"{what} {ref!r} failed ({type(exc).__name__}: {exc})") from None
    if not isinstance(target, Pipeline):
        raise SettingsError(f"{what} {ref!r} is neither a saga.App nor a Pipeline")
    return apply_overrides(target, settings)


def custom_pipeline(ref: str) -> Pipeline:
    """``SAGA_PIPELINE``'s target without overrides (kept for callers of old releases)."""
    from saga.config.settings import load_settings

    return load_pipeline(ref, load_settings(), what="SAGA_PIPELINE")
