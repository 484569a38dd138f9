"""structlog configuration: JSON lines in production, a readable console on a TTY."""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """Configure structlog once per process; key/value events, ISO timestamps."""
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors += [
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(),
        ]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
