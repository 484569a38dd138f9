"""Operation ids: every transition carries one, and a re-sent call with the same id is
answered from the record instead of applied twice."""

from __future__ import annotations

import itertools
import os

_OP_PREFIX = os.urandom(6).hex()
_op_counter = itertools.count()


def new_op() -> str:
    """A unique operation id: a random per-process prefix and a counter (no syscall)."""
    return f"{_OP_PREFIX}{next(_op_counter):x}"
