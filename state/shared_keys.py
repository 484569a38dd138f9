"""The keys every saga type and partition of a keyspace shares: breakers, cached
embeddings, operators' budgets, billing keys, workers, the keyspace's own bookkeeping,
schedules and the console's tokens. ``Keys`` (state/keys.py) inherits them; none
carries a record's partition tag (the few that need one slot carry their own).
"""

from __future__ import annotations

import re

from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id, validate_step

_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]{8,64}")


def validate_digest(value: str) -> str:
    """A sha256 hex digest (console tokens and sessions are stored under one)."""
    if _HEX_DIGEST.fullmatch(value) is None:
        raise InvalidIdError("a console digest must be 64 lowercase hex characters")
    return value


class SharedKeys:
    """Keys formed from the keyspace's ``prefix`` alone (``Keys`` holds the fields)."""

    __slots__ = ()
    prefix: str

    # -- global (not touched by transition scripts) ---------------------------
    def breaker(self, name: str) -> str:
        return f"{self.prefix}:breaker:{validate_step(name)}"

    # The breaker key has no hash tag, so a tag made of its whole name puts its
    # companions in the same cluster slot: the breaker scripts touch all three.
    def breaker_probe(self, name: str) -> str:
        return f"{{{self.breaker(name)}}}:probe"

    def breaker_failures(self, name: str) -> str:
        return f"{{{self.breaker(name)}}}:failures"

    def embedding(self, model_digest: str, text_digest: str) -> str:
        """A cached embedding vector, shared by every record and user (hex digests of the
        model and the normalised text). One hash tag for all, so one MGET reads a whole
        request on a cluster."""
        for part in (model_digest, text_digest):
            if _HEX.fullmatch(part) is None:
                raise InvalidIdError("an embedding key part must be 8 to 64 hex characters")
        return f"{{{self.prefix}:emb}}:{model_digest}:{text_digest}"

    @property
    def ops_prefix(self) -> str:
        """Keys operators write and executors only read (ACL ``%R~saga/ops:*``)."""
        return f"{self.prefix}/ops"

    @property
    def console_prefix(self) -> str:
        """Keys only the console reads and writes (ACL ``~saga/console:*``)."""
        return f"{self.prefix}/console"

    def budgets(self) -> str:
        """A hash of per-user LLM budgets: user -> JSON ``{"daily": USD, "monthly": USD}``.
        Set by operators; executors read it before each model call (adapters/budget_gate.py)."""
        return f"{self.ops_prefix}:budgets"

    def legacy_budgets(self) -> str:
        """Where budgets were kept before the keys were split by writer (``saga:budgets``,
        writable by executors): ``saga init`` moves them to ``budgets()``."""
        return f"{self.prefix}:budgets"

    def billing_key(self, user_id: str) -> str:
        return f"{self.prefix}:billing:key:{validate_id(user_id, 'user_id')}"

    def billing_lock(self, user_id: str) -> str:
        return f"{self.prefix}:billing:lock:{validate_id(user_id, 'user_id')}"

    def worker_presence(self, worker: str) -> str:
        """A live worker's presence (steps, health address), expiring unless renewed."""
        return f"{self.prefix}:worker:{validate_id(worker, 'worker')}"

    def workers_registry(self) -> str:
        """A sorted set of worker names by when they last announced themselves (ms)."""
        return f"{self.prefix}:workers"

    def partition_count(self) -> str:
        """A hash: ``count`` (the partitions this keyspace was set up with), and ``to`` and
        ``op`` while ``saga partitions migrate`` moves records to another count."""
        return f"{self.prefix}:partitions"

    def schema_version(self) -> str:
        """A hash: ``version``, the keyspace's schema version, written by its first user
        and moved forward only by ``saga migrate`` (state/schema_version.py)."""
        return f"{self.prefix}:schema"

    def migrations(self) -> str:
        """A hash of ``saga migrate``'s progress: ``<id>:cursor`` (where a migration's next
        batch starts) and ``<id>:done``, so a killed run resumes where it stopped."""
        return f"{self.prefix}:migrations"

    def types_registry(self) -> str:
        """A hash of every saga type a worker or client has registered: name -> its steps
        in order (``saga.state.types``), read by ``saga top`` and ``--type``."""
        return f"{self.prefix}:types"

    # -- schedules (keyspace-wide, one hash tag: every schedule script's keys) -------
    def schedule_defs(self) -> str:
        """A hash: schedule name -> its definition (JSON, ``saga.state.schedules``)."""
        return f"{self.prefix}:{{schedules}}:defs"

    def schedule_due(self) -> str:
        """A zset: active schedule name -> its next fire time (ms); paused: absent."""
        return f"{self.prefix}:{{schedules}}:due"

    def schedule_last(self) -> str:
        """A hash: schedule name -> ``<tick ms>|<record id>`` of its last fire."""
        return f"{self.prefix}:{{schedules}}:last"

    # -- the web console (not touched by transition scripts) -------------------
    def console_tokens(self) -> str:
        """A hash of console bearer tokens: HMAC-SHA256 hex of the token under the console's
        secret (``SAGA_CONSOLE_SECRET``) -> name, role, times and a MAC of them."""
        return f"{self.console_prefix}:tokens"

    def console_session(self, digest: str) -> str:
        """A browser session (string with a TTL), by the HMAC hex of its cookie value."""
        return f"{self.console_prefix}:session:{validate_digest(digest)}"

    def console_secret_check(self) -> str:
        """An HMAC of a fixed text under the console's secret: a console started with
        another secret refuses to start instead of refusing every token."""
        return f"{self.console_prefix}:secret-check"

    def legacy_console_tokens(self) -> str:
        """Console tokens of the releases before HMAC keys (``saga:console:tokens``):
        never valid now; ``saga init`` deletes them."""
        return f"{self.prefix}:console:tokens"
