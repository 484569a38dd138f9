"""Errors raised by the state machine.

    SagaError                      root of every error this project raises
    ├── InvalidIdError             a record/user id or step name that could break a key
    │   └── UnknownEventError      a signal for an event its saga type never waits for
    ├── PartitionCountError        SAGA_PARTITIONS differs from the keyspace's stored count
    ├── StepRemovedError           sagas wait at a step this release removed, unserved
    ├── DurabilityError            SAGA_COMMIT_DURABILITY=fsync without WAITAOF or AOF
    └── StateError                 a transition was refused
        ├── SagaNotFoundError      no saga for that record
        ├── SagaExistsError        the record already has a saga for another user
        ├── LeaseLostError         a stale fencing token (reclaimed lease, new epoch)
        ├── StepConflictError      the saga is not at the step or state asked
        │   └── ReviewConflictError another reviewer decided first (stale version)
        └── ScriptVersionError     the server has scripts from another release

Step errors (retryable / permanent) live in ``saga.steps.errors`` and derive
from the same root.
"""

from __future__ import annotations


class SagaError(Exception):
    """Root of every error raised by saga."""


class InvalidIdError(SagaError, ValueError):
    """An id that would break a Redis key or hash tag."""


class UnknownEventError(InvalidIdError):
    """A signal names an event that no wait of its saga type declares: refused before
    anything is sent (it would be kept for a wait that never comes)."""


class PartitionCountError(SagaError):
    """This process's partition count is not the one the keyspace was set up with (or a
    migration to another count is under way): it would read and write the wrong keys."""


class SchemaVersionError(PartitionCountError):
    """The keyspace's schema version is newer than this release knows, or older than it
    can run on: refused, as a wrong partition count is, before any key is read."""


class StepRemovedError(SagaError):
    """Sagas wait at a step this release's pipeline no longer has (removed or renamed)
    and no live worker serves it: starting would strand them (``state.step_changes``)."""


class DurabilityError(SagaError):
    """``SAGA_COMMIT_DURABILITY=fsync`` against a server without ``WAITAOF`` (before
    Redis 7.2) or with its append-only file off: nothing would be acknowledged."""


class StateError(SagaError):
    """A state transition was refused."""


class SagaNotFoundError(StateError, LookupError):
    """No saga exists for the record."""


class SagaExistsError(StateError):
    """The record already has a saga owned by another user."""


class LeaseLostError(StateError):
    """The fencing token is stale: another claim or an operator superseded it."""


class StepConflictError(StateError):
    """The saga is not in the state or at the step the caller assumed."""


class ReviewConflictError(StepConflictError):
    """Another reviewer's decision came first: the review changed since it was read."""


class ScriptVersionError(StateError):
    """A script reply did not match this release's return-code table."""
