"""What ``saga doctor`` finds: the keyspace's schema version against this release's, and
sagas left waiting at steps this release removed or renamed (``state/step_changes.py``).

The second is what a worker of this release checks at start and refuses on; here an
operator sees it before rolling the workers, and while both releases run."""

from __future__ import annotations

from typing import Any

import msgspec

from saga.state.errors import StepRemovedError
from saga.state.step_changes import Stranded, refuse_stranded, removed_in_flight


class DoctorReport(msgspec.Struct, kw_only=True):
    """``saga doctor --json``."""

    saga_type: str
    schema_version: int
    """The keyspace's (0: made before versions)."""
    knows_up_to: int
    """The newest schema this release knows (``state/schema_version.py``)."""
    oldest_runnable: int
    stranded: list[Stranded]
    """Steps this release lacks at which sagas wait (``served``: a live worker of another
    release still runs them)."""
    findings: list[str]
    """One sentence per problem; empty when there is none."""
    ok: bool
    """No step left unserved: this release's workers would start."""


def stranded_sentence(saga_type: str, s: Stranded) -> str:
    """One sentence for one stranded step: the worker's refusal, or, served, the warning."""
    if s.served:
        return (
            f"{s.waiting} saga(s) of type {saga_type!r} wait at step {s.step!r}, which this "
            "release removed or renamed; a live worker of another release serves it: keep "
            f"one running until `saga top` shows nothing at {s.step!r}"
        )
    try:
        refuse_stranded(saga_type, [s])
    except StepRemovedError as exc:  # the sentence a worker of this release refuses with
        return f"{exc}; until then this release's workers refuse to start"
    raise AssertionError("an unserved stranded step is always refused")


async def examine(client: Any, keys: Any, steps: tuple[str, ...]) -> DoctorReport:
    """The report for ``keys``' saga type, whose steps in this release are ``steps``."""
    from saga.state import schema_version

    found = await removed_in_flight(client, keys, steps)
    return DoctorReport(
        saga_type=keys.saga_type,
        schema_version=await schema_version.read_version(client, keys),
        knows_up_to=schema_version.CURRENT,
        oldest_runnable=schema_version.OLDEST_RUNNABLE,
        stranded=found,
        findings=[stranded_sentence(keys.saga_type, s) for s in found],
        ok=all(s.served for s in found),
    )


Report = DoctorReport
"""The name ``saga.cli.shapes`` makes the ``doctor`` schema from (imported only then)."""
