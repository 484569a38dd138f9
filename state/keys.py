"""The whole key schema: every Redis key saga uses is formed here and nowhere else (the
keys every type and partition shares in ``state/shared_keys.py``, a base of ``Keys``).

Every key one script touches carries the record's partition hash tag
(``{p3}``), so each transition runs unchanged on Redis Cluster: the saga hash,
its history, its pages and the partition's streams, indexes and counters all
land in one slot.

Several saga types share one Redis: a type's keys carry its name in the hash tag
(``saga:{orders.p3}:ready:router``), so each type's records, streams, indexes,
counters and step registry are its own, and types spread over a cluster's slots.
The default type (``documents``, the document pipeline) keeps the tag ``{p3}``:
its keys are exactly those of the releases before types. Breakers, billing keys,
cached embeddings and the registry of types are shared by all types.

Keys are split by who may write them, so an ACL user grants exactly that
(deploy/redis/saga-users.acl, docs/security.md):

- ``saga:*`` and ``{saga:*``: the engine's state, written by executors, the controller
  and operators (through the scripts).
- ``saga/ops:*`` (``ops_prefix``): what operators set and executors only read — the
  per-user budget limits. The spend counted against them is the engine's
  (``spend``, written by commit and fail), so no script writes here.
- ``saga/console:*`` (``console_prefix``): the console's tokens and sessions, which
  no executor may read or write.

``/`` cannot occur in a key prefix, so no prefix's engine keys fall under another
prefix's ``saga/…`` patterns.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id, validate_work
from saga.state.model import SagaState
from saga.state.sealing import Sealer
from saga.state.shared_keys import SharedKeys

GROUP = "executors"
"""The one consumer group on every ready stream."""

DEFAULT_TYPE = "documents"
"""The saga type of the document pipeline; its keys have no type in them."""

ERASED_USER = "~erased"
"""Who the cost ledgers name in place of a user whose data was purged: the amounts stay.
Not a valid user id (``ids.validate_id``), so no real user shares its fields."""

_ACTIVE = (SagaState.PENDING, SagaState.RUNNING)
INDEXED = (
    SagaState.PENDING,
    SagaState.RUNNING,
    SagaState.WAITING_RETRY,
    SagaState.COMPLETED,
    SagaState.FAILED,
    SagaState.CANCELLED,
)
"""The states whose index keys every transition receives, in this order (KEYS[i..i+5])."""
SHARED_INDEX = {
    SagaState.COMPENSATING: SagaState.RUNNING,
    SagaState.COMPENSATED: SagaState.CANCELLED,
    SagaState.COMPENSATION_FAILED: SagaState.FAILED,
    SagaState.WAITING: SagaState.WAITING_RETRY,
}
"""The compensation states share an index with a state of INDEXED (readers filter on
the saga's own state, as for pending and running): no script's KEYS layout changed
when they were added, and no transition passes more keys."""


def index_position(state: SagaState) -> int:
    """Where ``state``'s index key is among the state indexes a script receives."""
    return INDEXED.index(SHARED_INDEX.get(state, state))


_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,32}")
_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")


def validate_type(name: object) -> str:
    """Saga type names are lowercase identifiers (they appear in keys and hash tags)."""
    if not isinstance(name, str) or _TYPE.fullmatch(name) is None:
        raise InvalidIdError(
            f"saga type name {name!r} must be a lowercase identifier of at most 32 characters"
        )
    return name


@dataclass(frozen=True, slots=True)
class Keys(SharedKeys):
    """Forms keys for one saga type (``saga_type``) of one keyspace (``prefix``), split
    into ``partitions`` hash tags, and seals its patient data with the keyspace's data
    key when there is one."""

    prefix: str = "saga"
    partitions: int = 1
    saga_type: str = DEFAULT_TYPE
    sealer: Sealer | None = field(default=None, compare=False)
    """``SAGA_DATA_KEY``'s cipher (state/sealing.py); None stores values in clear."""

    def seal(self, data: bytes) -> bytes:
        return self.sealer.seal(data) if self.sealer is not None and data else data

    def unseal(self, data: bytes) -> bytes:
        return self.sealer.unseal(data) if self.sealer is not None else data

    def __post_init__(self) -> None:
        validate_type(self.saga_type)
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

    def record_base(self, partition: int) -> str:
        """What a record's keys in ``partition`` start with (``<base>:saga:<record>``):
        claim_steps builds them from it when it reads its entries itself."""
        return self._p(partition)

    def _p(self, partition: int) -> str:
        return _base(self.prefix, self.saga_type, partition)

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
        # An undo attempt (undo:<step>) caches its answers apart from its step's.
        return f"{self._r(record_id)}:llm:{record_id}:{validate_work(step)}:{digest}"

    def derived(self, record_id: str) -> str:
        """The cached embeddings (``embedding`` keys) the record's attempts used: what
        ``saga purge`` deletes besides the record's own keys (a set, expiring with them)."""
        return f"{self._r(record_id)}:derived:{record_id}"

    def llm_cache_of(self, record_id: str) -> str:
        """SCAN pattern of one record's cached LLM answers (a record id never holds a glob
        character: ``ids.validate_id``). It also matches a record whose id starts with
        ``<record_id>:``; ``saga.state.purge`` keeps only the keys of this record."""
        return f"{self._r(record_id)}:llm:{record_id}:*"

    # -- per partition and step --------------------------------------------
    # Formed on every transition: cached per (prefix, type, partition, step, kind).
    def ready(self, partition: int, step: str) -> str:
        return _step_key(self.prefix, self.saga_type, partition, step, "ready")

    def urgent(self, partition: int, step: str) -> str:
        """A zset: sagas with a priority above 0 waiting at the step -> enqueue ms."""
        return _step_key(self.prefix, self.saga_type, partition, step, "urgent")

    def lowered(self, partition: int, step: str) -> str:
        """A zset: priority-0 entries set aside for urgent ones, ``<record>|<epoch>`` ->
        the saga's creation ms (``includes/lowered.lua``)."""
        return _step_key(self.prefix, self.saga_type, partition, step, "lowered")

    def delayed(self, partition: int, step: str) -> str:
        return _step_key(self.prefix, self.saga_type, partition, step, "delayed")

    def item_retries(self, partition: int, step: str) -> str:
        """A zset: a map step's items waiting for their retry, ``<record>|<item>|<epoch>`` ->
        due ms (``lua/fail_items.lua``, ``lua/promote_items.lua``)."""
        return _step_key(self.prefix, self.saga_type, partition, step, "itemretry")

    def dead(self, partition: int, step: str) -> str:
        return _step_key(self.prefix, self.saga_type, partition, step, "dead")

    def quarantine(self, partition: int) -> str:
        return f"{self._p(partition)}:quarantine"

    def stats(self, partition: int) -> str:
        return f"{self._p(partition)}:stats"

    def costs(self, partition: int, day: str) -> str:
        return f"{self._p(partition)}:costs:{day}"

    def spend(self, partition: int, month: str) -> str:
        """A month's LLM spend per user (``yyyy-mm``): field ``<user>`` is the month's total,
        ``<user>|<dd>`` a day's; written by commit and fail, read by the budget check."""
        return f"{self._p(partition)}:spend:{month}"

    def holds(self, partition: int) -> str:
        """Budget reservations of model calls in flight (hash): field ``<hold id>`` (the
        call's cache key) -> ``<user>|<usd>|<token>|<record>``, field ``u|<user>`` -> the
        user's total held; written by reserve_budget, released by commit and fail."""
        return f"{self._p(partition)}:holds"

    def holds_due(self, partition: int) -> str:
        """When each reservation lapses (zset ``<hold id>`` -> the attempt's lease
        deadline, ms): the maintenance sweep releases those of attempts gone."""
        return f"{self._p(partition)}:holds:due"

    def inflight(self, partition: int, step: str) -> str:
        """Attempts of a step claimed under a per-user cap (zset ``<user>|<record>`` ->
        lease deadline ms); see ``SAGA_USER_MAX_INFLIGHT``."""
        return _step_key(self.prefix, self.saga_type, partition, step, "inflight")

    def deferred(self, partition: int, step: str) -> str:
        """Ready entries set aside because their user was at the cap (zset, score 0,
        member ``<user>|<ms>|<record>``: lexical order is per-user arrival order)."""
        return _step_key(self.prefix, self.saga_type, partition, step, "deferred")

    def waits(self, partition: int) -> str:
        """The timers of parked sagas (zset record -> due ms): a wait's timeout or a
        sleep's end, promoted by the sweep (``saga.state.signals``)."""
        return f"{self._p(partition)}:waits"

    # -- per partition indexes -----------------------------------------------
    def state_index(self, partition: int, state: SagaState) -> str:
        """Sagas by state, scored by when they entered it. Pending and running share
        one index ("active"): claims and hand-offs between steps, the two commonest
        transitions, then move nothing (readers filter on the saga's own state)."""
        return _state_index(self._p(partition), state)

    def state_indexes(self, partition: int) -> list[str]:
        """One index key per state of INDEXED, in that order (the Lua scripts rely on it)."""
        return list(_state_indexes(self.prefix, self.saga_type, partition))

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

    def retag(self, key: str, partition: int) -> str:
        """A key of one of this keyspace's partitions, in ``partition`` instead (a record's
        key, moved by ``saga partitions migrate``)."""
        head, sep, rest = key.partition("}:")
        if not sep or not head.startswith(f"{self.prefix}:{{p"):
            raise InvalidIdError(f"{key!r} is not a partitioned key of {self.prefix!r}")
        return f"{self._p(partition)}:{rest}"

    def ledger_patterns(self, partition: int) -> tuple[str, str]:
        """SCAN patterns of a partition's cost ledgers (``costs`` by day, ``spend`` by
        month): a user's erasure moves their fields to ``ERASED_USER``."""
        return f"{self._p(partition)}:costs:*", f"{self._p(partition)}:spend:*"

    def every_saga_pattern(self) -> str:
        """SCAN pattern of every saga hash of this keyspace, of every type and partition
        (``saga import`` refuses a keyspace where it matches)."""
        return f"{self.prefix}:{{*}}:saga:*"

    def every_partitioned_pattern(self) -> str:
        """SCAN pattern of every key of every type's partitions (``saga keys rotate``)."""
        return f"{self.prefix}:{{*"

    def kind_of(self, key: str) -> str:
        """What a partitioned key of this keyspace holds: ``saga``, ``hist``, ``pages``,
        ``llm``, ``dead``, ``ready``, ``idx``, … (the name after its hash tag); "" for
        another key."""
        head, sep, rest = key.partition("}:")
        if not sep or not head.startswith(f"{self.prefix}:{{"):
            return ""
        return rest.partition(":")[0]

    def reseal_scratch(self, stream: str) -> str:
        """Where ``saga keys rotate`` rewrites a partitioned stream before swapping it in
        (the same hash tag: one slot)."""
        head, sep, rest = stream.partition("}:")
        if not sep or not head.startswith(f"{self.prefix}:{{"):
            raise InvalidIdError(f"{stream!r} is not a partitioned key of {self.prefix!r}")
        return f"{head}}}:reseal:{rest}"

    def llm_cache_pattern(self, partition: int) -> str:
        """SCAN pattern of a partition's cached LLM answers (moved with their records)."""
        return f"{self._p(partition)}:llm:*"

    def steps_registry(self) -> str:
        """A set of every step name a worker or client of this type has created groups for."""
        if self.saga_type == DEFAULT_TYPE:
            return f"{self.prefix}:steps"
        return f"{self.prefix}:steps:{self.saga_type}"

    def of_type(self, saga_type: str) -> Keys:
        """The same keyspace and partitions, for another saga type."""
        return replace(self, saga_type=saga_type)


class RecordKeys(NamedTuple):
    partition: int
    saga: str
    history: str
    pages: str


@functools.lru_cache(maxsize=4096)
def _base(prefix: str, saga_type: str, partition: int) -> str:
    """``saga:{p3}`` for the default type, ``saga:{orders.p3}`` for the others."""
    if saga_type == DEFAULT_TYPE:
        return f"{prefix}:{{p{partition}}}"
    return f"{prefix}:{{{saga_type}.p{partition}}}"


@functools.lru_cache(maxsize=4096)
def _step_key(prefix: str, saga_type: str, partition: int, step: str, kind: str) -> str:
    return f"{_base(prefix, saga_type, partition)}:{kind}:{validate_work(step)}"


@functools.lru_cache(maxsize=4096)
def _state_indexes(prefix: str, saga_type: str, partition: int) -> tuple[str, ...]:
    # Every transition passes these six keys: form them once per partition.
    base = _base(prefix, saga_type, partition)
    return tuple(_state_index(base, s) for s in INDEXED)


def _state_index(base: str, state: SagaState) -> str:
    state = SHARED_INDEX.get(state, state)
    name = "active" if state in _ACTIVE else state.value
    return f"{base}:idx:state:{name}"
