"""structlog configuration: JSON lines in production, a readable console on a TTY.

Every line, structlog's and the standard library's (httpx, redis, ...), goes
through the redaction processor (``saga.telemetry.redact``) before it is
rendered. litellm's own loggers are silenced: they print through their own
handler and can echo prompts.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any

import msgspec
import structlog

from saga.telemetry.redact import redact
from saga.telemetry.scope import merge_scope
from saga.wiring.log_output import LineWriterFactory

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm")
"""litellm's stdlib loggers, silenced here and again by ``quiet_litellm`` on import."""


_ENCODER = msgspec.json.Encoder(enc_hook=str)


def _json(obj: object, **_: object) -> str:
    """msgspec's encoder: several times faster than json.dumps on a log line."""
    return _ENCODER.encode(obj).decode()


_SECOND: list[Any] = [-1, ""]  # (the second last formatted, its ISO text)


def stamp_utc(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """ISO-8601 UTC with microseconds, as structlog's TimeStamper(fmt="iso", utc=True)
    writes it, at a third of its cost: the date and time are formatted once a second."""
    now = time.time()
    sec = int(now)
    if sec != _SECOND[0]:
        _SECOND[0], _SECOND[1] = sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    event_dict["timestamp"] = f"{_SECOND[1]}.{int((now - sec) * 1e6):06d}Z"
    return event_dict


def shared_processors() -> list[structlog.typing.Processor]:
    """What every line goes through before rendering (tests capture with these)."""
    return [
        merge_scope,
        structlog.processors.add_log_level,
        stamp_utc,
        redact,
    ]


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """Configure structlog once per process; key/value events, ISO timestamps."""
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(serializer=_json)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[*shared_processors(), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=LineWriterFactory(),
        cache_logger_on_first_use=True,
    )
    _route_stdlib(renderer, max(numeric, logging.WARNING))


def _route_stdlib(renderer: structlog.typing.Processor, level: int) -> None:
    """Records of other libraries: the same redaction and rendering, WARNING and up."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared_processors()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_saga", False)]:
        root.removeHandler(old)
    handler._saga = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    for name in LITELLM_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
