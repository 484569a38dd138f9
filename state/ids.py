"""Validation of the ids that become parts of Redis keys.

A record id or user id ends up inside a key next to a ``{pN}`` hash tag, so
anything that could open or close a tag, split a key or confuse a log line is
refused before anything is written.
"""

from __future__ import annotations

import re

from saga.state.errors import InvalidIdError

MAX_ID_LENGTH = 128
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*")
_STEP = re.compile(r"[a-z][a-z0-9_]{0,31}")


def validate_id(value: object, what: str = "record_id") -> str:
    """Return ``value`` if it is a safe id, else raise InvalidIdError naming the problem."""
    if not isinstance(value, str):
        raise InvalidIdError(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidIdError(f"{what} is empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdError(
            f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}"
        )
    if _ID.fullmatch(value) is None:
        bad = next((c for c in value if not _allowed(c)), None)
        if bad is None:
            raise InvalidIdError(f"{what} {value!r} must start with a letter or digit")
        raise InvalidIdError(
            f"{what} {value!r} contains {bad!r}; allowed are letters, digits and . _ : @ + = -"
        )
    return value


def is_safe_id(value: str) -> bool:
    """``validate_id`` as a test, with no message: the hot path's quick check."""
    return len(value) <= MAX_ID_LENGTH and _ID.fullmatch(value) is not None


def _allowed(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "._:@+=-")


def validate_step(name: object) -> str:
    """Step names are lowercase identifiers (they appear in keys and metric labels)."""
    if not isinstance(name, str) or _STEP.fullmatch(name) is None:
        raise InvalidIdError(
            f"step name {name!r} must be a lowercase identifier of at most 32 characters"
        )
    return name


_WORK = re.compile(r"(?:undo:)?[a-z][a-z0-9_]{0,31}")


def validate_work(name: object) -> str:
    """A step name, or the pseudo-step ``undo:<step>`` that runs its compensation."""
    if not isinstance(name, str) or _WORK.fullmatch(name) is None:
        raise InvalidIdError(
            f"step name {name!r} must be a lowercase identifier of at most 32 characters, "
            "or undo:<step>"
        )
    return name
