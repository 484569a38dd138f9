"""Errors of the console, each with the HTTP status it answers with.

ConsoleError            status 400: bad input, one sentence
├── Unauthenticated     401: no credentials, or unknown ones
├── Forbidden           403: the role may not do this (or a CSRF check failed)
├── NotFound            404
└── TooManyRequests     429: over the token's rate (answered with Retry-After)
"""

from __future__ import annotations


class ConsoleError(Exception):
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unauthenticated(ConsoleError):
    status = 401


class Forbidden(ConsoleError):
    status = 403


class Unprocessable(ConsoleError):
    """Well-formed, but naming something the saga type does not have."""

    status = 422


class NotFound(ConsoleError):
    status = 404


class ConsoleConfigError(ValueError):
    """The console cannot start with this configuration (a bad token file, --dev off
    loopback); the CLI prints it as one sentence and exits 2."""


class TooManyRequests(ConsoleError):
    status = 429

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
