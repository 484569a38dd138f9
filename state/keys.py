"""The whole key schema: every Redis key saga uses is formed here and nowhere else.

Every key one script touches carries the record's partition hash tag
(``{p3}``), so each transition runs unchanged on Redis Cluster: the saga hash,
its history, its pages and the partition's streams, indexes and counters all
land in one slot.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass
from typing import NamedTuple

from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id, validate_step
from saga.state.model import SagaState

GROUP = "executors"
"""The one consumer group on every ready stream."""

_ACTIVE = (SagaState.PENDING, SagaState.RUNNING)
_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,32}")


@dataclass(frozen=True, slots=True)
class Keys:
    """Forms keys for one keyspace (``prefix``) split into ``partitions`` hash tags."""

    prefix: str = "saga"
    partitions: int = 1

    def __post_init__(self) -> None:
        if _PREFIX.fullmatch(self.prefix) is None:
            raise InvalidIdError(f"key prefix {self.prefix!r} must match {_PREFIX.pattern}")
        if not 1 <= self.partitions <= 1024:
            raise InvalidIdError(f"partitions must be 1..1024, got {self.partitions}")

    # -- partitions ---------------------------------------------------------
    def partition_of(self, record_id: str) -> int:
        """Stable partition of a record: crc32 of its id, modulo the partition count."""
        return zlib.crc32(record_id.encode()) % self.partitions

    def all_partitions(self) -> range:
        return range(self.partitions)

    def _p(self, partition: int) -> str:
        return f"{self.prefix}:{{p{partition}}}"

    def _r(self, record_id: str) -> str:
        validate_id(record_id, "record_id")
        return self._p(self.partition_of(record_id))

    # -- per record ---------------------------------------------------------
    def record(self, record_id: str) -> RecordKeys:
        """A record's partition and its three keys, validating the id once (hot path)."""
        validate_id(record_id, "record_id")
        p = self.partition_of(record_id)
        base = self._p(p)
        return RecordKeys(
            p, f"{base}:saga:{record_id}", f"{base}:hist:{record_id}", f"{base}:pages:{record_id}"
        )

    def saga(self, record_id: str) -> str:
        return self.record(record_id).saga

    def history(self, record_id: str) -> str:
        return self.record(record_id).history

    def pages(self, record_id: str) -> str:
        return self.record(record_id).pages

    def llm_cache(self, record_id: str, step: str, digest: str) -> str:
        return f"{self._r(record_id)}:llm:{record_id}:{validate_step(step)}:{digest}"

    # -- per partition and step --------------------------------------------
    # Formed on every transition: cached per (prefix, partition, step, kind).
    def ready(self, partition: int, step: str) -> str:
        return _step_key(self.prefix, partition, step, "ready")

    def delayed(self, partition: int, step: str) -> str:
        return _step_key(self.prefix, partition, step, "delayed")

    def dead(self, partition: int, step: str) -> str:
        return _step_key(self.prefix, partition, step, "dead")

    def quarantine(self, partition: int) -> str:
        return f"{self._p(partition)}:quarantine"

    def stats(self, partition: int) -> str:
        return f"{self._p(partition)}:stats"

    def costs(self, partition: int, day: str) -> str:
        return f"{self._p(partition)}:costs:{day}"

    # -- per partition indexes -----------------------------------------------
    def state_index(self, partition: int, state: SagaState) -> str:
        """Sagas by state, scored by when they entered it. Pending and running share
        one index ("active"): claims and hand-offs between steps, the two commonest
        transitions, then move nothing (readers filter on the saga's own state)."""
        name = "active" if state in _ACTIVE else state.value
        return f"{self._p(partition)}:idx:state:{name}"

    def state_indexes(self, partition: int) -> list[str]:
        """One index key per state, in SagaState order (the Lua scripts rely on it)."""
        return list(_state_indexes(self.prefix, partition))

    def user_index(self, partition: int, user_id: str) -> str:
        return f"{self._p(partition)}:idx:user:{validate_id(user_id, 'user_id')}"

    def created_index(self, partition: int) -> str:
        return f"{self._p(partition)}:idx:created"

    def review_index(self, partition: int) -> str:
        """Sagas a step flagged for a person's review (record -> ms flagged)."""
        return f"{self._p(partition)}:idx:review"

    def retired(self, partition: int) -> str:
        """Completed sagas by expiry time (member ``<user>|<record>``), for index pruning."""
        return f"{self._p(partition)}:retired"

    # -- global (not touched by transition scripts) ---------------------------
    def breaker(self, name: str) -> str:
        return f"{self.prefix}:breaker:{validate_step(name)}"

    # The breaker key has no hash tag, so a tag made of its whole name puts its
    # companions in the same cluster slot: the breaker scripts touch all three.
    def breaker_probe(self, name: str) -> str:
        return f"{{{self.breaker(name)}}}:probe"

    def breaker_failures(self, name: str) -> str:
        return f"{{{self.breaker(name)}}}:failures"

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

    def retag(self, key: str, partition: int) -> str:
        """A key of one of this keyspace's partitions, in ``partition`` instead (a record's
        key, moved by ``saga partitions migrate``)."""
        head, sep, rest = key.partition("}:")
        if not sep or not head.startswith(f"{self.prefix}:{{p"):
            raise InvalidIdError(f"{key!r} is not a partitioned key of {self.prefix!r}")
        return f"{self._p(partition)}:{rest}"

    def llm_cache_pattern(self, partition: int) -> str:
        """SCAN pattern of a partition's cached LLM answers (moved with their records)."""
        return f"{self._p(partition)}:llm:*"

    def steps_registry(self) -> str:
        """A set of every step name a worker or client has created groups for."""
        return f"{self.prefix}:steps"


class RecordKeys(NamedTuple):
    partition: int
    saga: str
    history: str
    pages: str


@functools.lru_cache(maxsize=4096)
def _step_key(prefix: str, partition: int, step: str, kind: str) -> str:
    return f"{prefix}:{{p{partition}}}:{kind}:{validate_step(step)}"


@functools.cache
def _state_indexes(prefix: str, partition: int) -> tuple[str, ...]:
    # Every transition passes these six keys: form them once per partition.
    keys = Keys(prefix)
    return tuple(keys.state_index(partition, s) for s in SagaState)
