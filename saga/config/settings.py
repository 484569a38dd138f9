"""One frozen settings struct, read from the environment in one function.

Nothing reads the environment elsewhere, and nothing reads it at import time:
``load_settings()`` is called by the CLI and passed down explicitly. The per-step
overrides are parsed in ``saga.config.step_overrides`` (``StepSettings`` is re-exported here),
the Redis connection checks (TLS, timeouts) are in ``saga.config.redis_checks``, the console's
and the breakers' groups in ``saga.config.groups``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec

from saga.adapters.breaker_names import BILLING, EMBEDDING, LLM
from saga.adapters.fetch_policy import FetchPolicy, build_policy
from saga.adapters.server_allocator import CHOICES as MALLOC_CHOICES
from saga.config.data import retention_from
from saga.config.groups import BreakerSettings, ConsoleSettings, console_settings
from saga.config.redis_checks import check_reply_timeout, redis_tls
from saga.config.step_overrides import StepSettings, step_settings
from saga.state.limits import StateLimits
from saga.steps.config import ExtractorKind, StepConfig


class SettingsError(ValueError):
    """An environment variable has a value saga cannot use."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    redis_url: str | None = None
    """``REDIS_URL``; unset starts (or reuses) the embedded server under ``data_dir``."""
    redis_password: str = ""
    """``REDIS_PASSWORD`` (secret): AUTH password, used when ``REDIS_URL`` carries none."""
    redis_ca_file: str | None = None
    """``SAGA_REDIS_CA_FILE``: CA bundle for ``rediss://``."""
    redis_cert_file: str | None = None
    """``SAGA_REDIS_CERT_FILE``, ``SAGA_REDIS_KEY_FILE``: a client certificate for ``rediss://``."""
    redis_key_file: str | None = None
    data_key: str = ""
    """``SAGA_DATA_KEY`` (secret, base64): encrypts page texts, step inputs and outputs
    and document references at rest (AES-GCM, state/sealing.py); "" stores them in clear."""
    data_keys: str = ""
    """``SAGA_DATA_KEYS`` (secret): ``id:base64,...``, newest first: the first seals, every
    one (and ``SAGA_DATA_KEY``) opens; ``saga keys rotate`` re-seals under the first."""
    redis_timeout_s: float = 10.0
    """``SAGA_REDIS_TIMEOUT``: seconds a Redis reply may take before the call is re-sent."""
    cluster: bool = False
    """``SAGA_REDIS_CLUSTER``: talk to Redis Cluster (one slot per partition)."""
    data_dir: Path = Path(".saga-data")
    embedded_malloc: str = "auto"
    """``SAGA_EMBEDDED_MALLOC``: the embedded server's allocator (auto, jemalloc, tuned, libc)."""
    partitions: int = 1
    """``SAGA_PARTITIONS``: hash-tag partitions of the record space."""
    commit_durability: str = "local"
    """``SAGA_COMMIT_DURABILITY``: ``local`` (a write is done when the primary has it),
    ``replica`` (starts and commit batches also wait for a replica: ``WAIT``), ``fsync``
    (they wait for the primary's AOF fsync: ``WAITAOF``) or ``fsync+replica`` (for the
    primary's fsync and a replica's: ``WAITAOF 1 1``)."""
    key_prefix: str = "saga"
    document_source: str = ""
    """``SAGA_DOCUMENT_SOURCE``: template resolving a record's document, ``{record_id}``."""
    document_policy: FetchPolicy = FetchPolicy()
    """Which documents a worker may read: ``SAGA_DOCUMENT_URL_PREFIXES``,
    ``SAGA_DOCUMENT_ROOTS``, ``SAGA_DOCUMENT_NETWORKS`` and the source template."""
    health_port: int | None = None
    """``SAGA_HEALTH_PORT``: /livez, /readyz, /metrics. Unset: 8080, or a free port (logged
    and shown by ``saga top``) when another process holds 8080; set: that port or exit 2."""
    health_host: str = "127.0.0.1"
    """``SAGA_HEALTH_HOST``: the health server's bind address. Default: loopback, except in
    Kubernetes (``KUBERNETES_SERVICE_HOST`` set), where probes come from the node: 0.0.0.0."""
    log_format: str = "console"
    log_level: str = "info"
    billing_url: str = ""
    results_url: str = ""
    """``SAGA_RESULTS_URL``: the document pipeline's optional fourth step, ``publish``,
    POSTs the grouped results there (its compensation DELETEs them). Unset: no publish."""
    review_before_publish: bool = False
    """``SAGA_REVIEW_BEFORE_PUBLISH=1`` (with ``SAGA_RESULTS_URL``): a review gate, step
    ``review``, before publish: a saga flagged for review is published only once a person
    accepted or completed its review; an unflagged one passes at once."""
    llm_model: str = "openai/gpt-4o-mini"
    llm_api_base: str = ""
    llm_api_key: str = ""
    """A single key for every user when no billing service is configured (secret)."""
    llm_timeout_s: float = 60.0
    llm_mock_response: str = ""
    """Offline demos and tests: litellm's ``mock_response`` for every call."""
    llm_max_input_tokens: int = 0
    """``SAGA_LLM_MAX_INPUT_TOKENS``: the model's window; 0 takes it from litellm's model map.
    The LLM extractor sends a document in as many requests as this window needs."""
    llm_max_tokens: int = 0
    """``SAGA_LLM_MAX_TOKENS``: the most tokens a model answer may have (sent as
    ``max_tokens``); 0 sends none. A budget holds this many output tokens per call (the
    model's maximum from litellm's map when 0): set it to hold less."""
    grouper_embedding_api_base: str = ""
    """``SAGA_GROUPER_EMBEDDING_API_BASE``: where the grouper's embedding model is served
    ("" takes ``SAGA_LLM_API_BASE``). The model and threshold are in ``step_config``."""
    parser: ExtractorKind = ExtractorKind.RULES
    drain_s: float | None = None
    """``SAGA_DRAIN_SECONDS``: on SIGTERM, how long in-flight steps may take to finish and
    commit. None (unset): the longest timeout of the steps the worker serves, so a step
    that started just before the signal can still finish."""
    worker_processes: int = 1
    """``SAGA_WORKER_PROCESSES``: event loops ``saga worker`` forks, sharing nothing but
    Redis, so one pod uses its cores (``--processes`` overrides); at least 1."""
    read_batch: int = 50
    block_ms: int = 1000
    claim_in_read: bool = False
    """``SAGA_CLAIM_IN_READ=1`` (off by default): a step whose last read came back full
    reads and claims its next batch in one script (``saga.worker.read_claims``)."""
    promote_interval_s: float = 1.0
    recovery_interval_s: float = 10.0
    gc_threshold: int = 50_000
    """``SAGA_GC_THRESHOLD``: young-generation threshold of Python's cycle collector in a
    worker, whose startup heap is frozen too (``saga.worker.gc_tuning``); 0: Python's own."""
    budget_refresh_s: float = 5.0
    """``SAGA_BUDGET_REFRESH``: how often (s) a worker re-reads whether any user has an LLM
    budget; until then a first budget is not enforced (``saga budget``)."""
    user_max_inflight: int = 0
    """``SAGA_USER_MAX_INFLIGHT``: attempts of one step that one user may have running at
    once, per partition; entries over it wait aside so other users' work goes first.
    0: no cap. Per step: ``SAGA_<STEP>_USER_MAX_INFLIGHT``."""
    metrics_by_user: bool = False
    """``SAGA_METRICS_BY_USER``: LLM cost and token metrics labelled by user too."""
    otel_endpoint: str = ""
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``): export traces there."""
    archive_dir: str = ""
    """``SAGA_ARCHIVE_DIR``: the retention sweep writes each saga it deletes there first
    (JSON Lines, ``saga export``'s format; ``saga import`` reads it back); "" deletes only."""
    retention_sweep: bool = True
    """``SAGA_RETENTION_SWEEP`` (on | off): this process's maintenance deletes sagas whose
    retention ended. The chart turns it off on workers when only the controller has the
    archive volume, so no saga is deleted unarchived."""
    pipeline: str = ""
    """``SAGA_PIPELINE``: ``module:function`` returning a Pipeline; "" is the document pipeline."""
    steps: dict[str, StepSettings] = {}
    limits: StateLimits = StateLimits()
    step_config: StepConfig = StepConfig()
    breaker: BreakerSettings = BreakerSettings()
    console: ConsoleSettings = ConsoleSettings()

    def for_step(self, name: str) -> StepSettings:
        return self.steps.get(name, StepSettings())

    def breakers(self) -> tuple[str, ...]:
        """The circuit breakers this deployment's processes report: the LLM's always, the
        embedding model's when the grouper has one, billing's when a service is set."""
        used = ((LLM, True), (EMBEDDING, bool(self.step_config.embedding_model)),
                (BILLING, bool(self.billing_url)))  # fmt: skip
        return tuple(name for name, on in used if on)

    def masked(self) -> dict[str, object]:
        """The effective settings with secrets masked (``saga config``)."""
        data: dict[str, object] = msgspec.to_builtins(self, enc_hook=str)
        for secret in ("llm_api_key", "redis_password", "data_key", "data_keys"):
            if data.get(secret):
                data[secret] = "***"
        console = data.get("console")
        if isinstance(console, dict) and console.get("secret"):
            console["secret"] = "***"
        url = data.get("redis_url")
        if isinstance(url, str):
            data["redis_url"] = re.sub(r"//([^@/]*):([^@/]*)@", r"//\1:***@", url)
        return data


DURABILITIES = ("local", "replica", "fsync", "fsync+replica")
"""``SAGA_COMMIT_DURABILITY`` values, each in its one spelling (``replica+fsync`` too)."""


def durability_from(raw: str) -> str:
    """``SAGA_COMMIT_DURABILITY`` as one of DURABILITIES; the two waits combine with
    ``+`` or ``,`` in either order."""
    parts = {p.strip() for p in raw.lower().replace(",", "+").split("+") if p.strip()}
    known = parts == {"local"} or (parts and parts <= {"fsync", "replica"})
    if not known:
        raise SettingsError(
            f"SAGA_COMMIT_DURABILITY={raw!r} must be local, replica, fsync or fsync+replica"
        )
    return "+".join(p for p in ("fsync", "replica") if p in parts) or "local"


def _at_least_one(name: str, value: float) -> int:
    if value < 1:
        raise SettingsError(f"{name}={value:g} must be at least 1")
    return int(value)


def _share(name: str, value: float) -> float:
    """A setting that is a share between 0 and 1."""
    if value > 1:
        raise SettingsError(f"{name}={value!r} must be between 0 and 1 (0.8 means 80%)")
    return value


def _default_roots(env: Mapping[str, str]) -> list[Path]:
    """Local documents a worker may read when ``SAGA_DOCUMENT_ROOTS`` is unset: none in
    Kubernetes; elsewhere the shipped samples and the current directory (quick start),
    unless that is ``/`` (which would allow every file)."""
    if env.get("KUBERNETES_SERVICE_HOST"):
        return []
    from saga import samples  # by its package, so this module may live in any folder

    roots = [Path(samples.__file__).resolve().parent]
    cwd = Path.cwd()
    return roots if cwd == Path(cwd.anchor) else [cwd, *roots]


def _default_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("saga", appauthor=False))


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read every ``SAGA_*`` variable (and ``REDIS_URL``) into one Settings."""
    env = os.environ if env is None else env

    def get(name: str, default: str = "") -> str:
        return env.get(name, default).strip()

    def num(name: str, default: float, kind: type = float) -> float:
        raw = get(name)
        if not raw:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r} is not a number") from None
        if value < 0:
            raise SettingsError(f"{name}={raw!r} must not be negative")
        return value  # type: ignore[no-any-return]

    def flag(name: str) -> bool:
        return get(name).lower() in ("1", "true", "yes", "on")

    try:
        steps = step_settings(env, num)
    except msgspec.ValidationError as exc:
        raise SettingsError(str(exc)) from None
    log_format = get("SAGA_LOG_FORMAT") or ("console" if sys.stderr.isatty() else "json")
    if log_format not in ("json", "console"):
        raise SettingsError(f"SAGA_LOG_FORMAT={log_format!r} must be json or console")
    malloc = get("SAGA_EMBEDDED_MALLOC", "auto").lower()
    if malloc not in MALLOC_CHOICES:
        raise SettingsError(
            f"SAGA_EMBEDDED_MALLOC={malloc!r} must be one of {', '.join(MALLOC_CHOICES)}"
        )
    durability = durability_from(get("SAGA_COMMIT_DURABILITY", "local"))
    parser = get("SAGA_PARSER", "rules")
    if parser not in ("rules", "llm"):
        raise SettingsError(f"SAGA_PARSER={parser!r} must be rules or llm")
    try:
        tls = redis_tls(get("REDIS_URL"), env, flag("SAGA_REDIS_TLS_INSECURE"))
        check_reply_timeout(num("SAGA_REDIS_TIMEOUT", 10.0), num("SAGA_BLOCK_MS", 1000, int))
        retention = retention_from(get("SAGA_RETENTION_DAYS"))
        policy = build_policy(
            template=get("SAGA_DOCUMENT_SOURCE"),
            url_prefixes=get("SAGA_DOCUMENT_URL_PREFIXES"),
            roots=get("SAGA_DOCUMENT_ROOTS") if "SAGA_DOCUMENT_ROOTS" in env else None,
            networks=get("SAGA_DOCUMENT_NETWORKS"),
            default_roots=_default_roots(env),
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    try:
        return Settings(
            redis_url=get("REDIS_URL") or None,
            redis_password=env.get("REDIS_PASSWORD", ""),
            redis_ca_file=tls[0],
            redis_cert_file=tls[1],
            redis_key_file=tls[2],
            redis_timeout_s=num("SAGA_REDIS_TIMEOUT", 10.0) or 10.0,
            data_key=_data_key(get("SAGA_DATA_KEY")),
            data_keys=_data_keys(get("SAGA_DATA_KEYS")),
            cluster=flag("SAGA_REDIS_CLUSTER"),
            data_dir=Path(get("SAGA_DATA_DIR")) if get("SAGA_DATA_DIR") else _default_data_dir(),
            embedded_malloc=malloc,
            partitions=int(num("SAGA_PARTITIONS", 1, int)),
            commit_durability=durability,
            key_prefix=get("SAGA_KEY_PREFIX", "saga"),
            document_source=get("SAGA_DOCUMENT_SOURCE"),
            document_policy=policy,
            health_port=int(num("SAGA_HEALTH_PORT", 0, int)) if get("SAGA_HEALTH_PORT") else None,
            health_host=get("SAGA_HEALTH_HOST")
            or ("0.0.0.0" if get("KUBERNETES_SERVICE_HOST") else "127.0.0.1"),
            log_format=log_format,
            log_level=get("SAGA_LOG_LEVEL", "info").lower(),
            billing_url=get("SAGA_BILLING_URL"),
            results_url=get("SAGA_RESULTS_URL"),
            review_before_publish=flag("SAGA_REVIEW_BEFORE_PUBLISH"),
            llm_model=get("SAGA_LLM_MODEL", "openai/gpt-4o-mini"),
            llm_api_base=get("SAGA_LLM_API_BASE"),
            llm_api_key=get("SAGA_LLM_API_KEY"),
            llm_timeout_s=num("SAGA_LLM_TIMEOUT", 60.0),
            llm_mock_response=get("SAGA_LLM_MOCK_RESPONSE"),
            llm_max_input_tokens=int(num("SAGA_LLM_MAX_INPUT_TOKENS", 0, int)),
            llm_max_tokens=int(num("SAGA_LLM_MAX_TOKENS", 0, int)),
            grouper_embedding_api_base=get("SAGA_GROUPER_EMBEDDING_API_BASE"),
            parser=ExtractorKind(parser),
            drain_s=num("SAGA_DRAIN_SECONDS", 0.0) if get("SAGA_DRAIN_SECONDS") else None,
            worker_processes=_at_least_one(
                "SAGA_WORKER_PROCESSES", num("SAGA_WORKER_PROCESSES", 1, int)
            ),
            read_batch=int(num("SAGA_READ_BATCH", 50, int)),
            block_ms=int(num("SAGA_BLOCK_MS", 1000, int)),
            claim_in_read=flag("SAGA_CLAIM_IN_READ"),
            promote_interval_s=num("SAGA_PROMOTE_INTERVAL", 1.0),
            recovery_interval_s=num("SAGA_RECOVERY_INTERVAL", 10.0),
            gc_threshold=int(num("SAGA_GC_THRESHOLD", 50_000, int)),
            budget_refresh_s=num("SAGA_BUDGET_REFRESH", 5.0),
            user_max_inflight=int(num("SAGA_USER_MAX_INFLIGHT", 0, int)),
            metrics_by_user=flag("SAGA_METRICS_BY_USER"),
            otel_endpoint=get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or get("OTEL_EXPORTER_OTLP_ENDPOINT"),
            pipeline=get("SAGA_PIPELINE"),
            archive_dir=get("SAGA_ARCHIVE_DIR"),
            retention_sweep=get("SAGA_RETENTION_SWEEP", "on").lower() not in _OFF,
            steps=steps,
            limits=StateLimits(
                history_maxlen=int(num("SAGA_HISTORY_MAXLEN", 10_000, int)),
                pages_ttl_s=int(num("SAGA_PAGES_TTL", 3600, int)),
                retention=retention,
                commit_replicas=1 if "replica" in durability else 0,
                commit_fsync="fsync" in durability,
                replica_wait_ms=int(num("SAGA_COMMIT_WAIT_MS", 1000, int)),
                priority_boost_ms=int(num("SAGA_PRIORITY_AGE_BOOST", 60, float) * 1000),
            ),
            step_config=StepConfig(
                max_document_bytes=int(num("SAGA_MAX_DOCUMENT_BYTES", 20 * 1024 * 1024, int)),
                max_pages=int(num("SAGA_MAX_PAGES", 200, int)),
                max_chars_per_page=int(num("SAGA_MAX_CHARS_PER_PAGE", 20_000, int)),
                max_page_content_bytes=int(
                    num("SAGA_MAX_PAGE_CONTENT_BYTES", 2 * 1024 * 1024, int)
                ),
                max_content_bytes=int(num("SAGA_MAX_CONTENT_BYTES", 32 * 1024 * 1024, int)),
                max_extract_memory_bytes=int(
                    num("SAGA_MAX_EXTRACT_MEMORY_BYTES", 512 * 1024 * 1024, int)
                ),
                extract_processes=int(num("SAGA_EXTRACT_PROCESSES", 2, int)),
                ocr=get("SAGA_OCR", "off").lower() in ("on", "1", "true", "yes"),
                ocr_languages=get("SAGA_OCR_LANGUAGES", "eng+deu+fra"),
                ocr_concurrency=int(num("SAGA_OCR_CONCURRENCY", 2, int)),
                ocr_min_confidence=int(num("SAGA_OCR_MIN_CONFIDENCE", 80, int)),
                extractor=ExtractorKind(parser),
                llm_vision=flag("SAGA_LLM_VISION"),
                llm_group_names=flag("SAGA_LLM_GROUP_NAMES"),
                embedding_model=get("SAGA_GROUPER_EMBEDDING_MODEL"),
                embedding_threshold=_share(
                    "SAGA_GROUPER_EMBEDDING_THRESHOLD",
                    num("SAGA_GROUPER_EMBEDDING_THRESHOLD", 0.9),
                ),
                max_output_bytes=int(num("SAGA_MAX_OUTPUT_BYTES", 512 * 1024, int)),
                min_coverage=_share(
                    "SAGA_PARSER_MIN_COVERAGE", num("SAGA_PARSER_MIN_COVERAGE", 0.9)
                ),
                document_source=get("SAGA_DOCUMENT_SOURCE"),
            ),
            breaker=BreakerSettings(
                failures=int(num("SAGA_BREAKER_FAILURES", 5, int)),
                window_s=num("SAGA_BREAKER_WINDOW", 30.0),
                cooldown_s=num("SAGA_BREAKER_COOLDOWN", 30.0),
            ),
            console=console_settings(get, num),
        )
    except msgspec.ValidationError as exc:
        raise SettingsError(str(exc)) from None


def _data_key(raw: str) -> str:
    """SAGA_DATA_KEY, checked here so a bad key is one sentence at start-up."""
    if raw:
        from saga.state.sealing import parse_key

        try:
            parse_key(raw)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
    return raw


_OFF = ("0", "false", "no", "off")


def _data_keys(raw: str) -> str:
    """SAGA_DATA_KEYS, checked at start-up like SAGA_DATA_KEY."""
    if raw:
        from saga.state.sealing import parse_keys

        try:
            parse_keys(raw)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
    return raw
