"""Steps a release no longer has, with sagas still waiting there (docs/sagas.md, "When a
type's steps change between releases").

A step removed or renamed by a release leaves its ready stream and its delayed retries
behind: the entries there wait for a worker that serves the old name. The steps registry
(``steps_registry``: every step any release created groups for) names the candidates;
what waits at each is read from its streams' consumer group (unread and pending entries)
and delayed set, a bounded read per partition. A worker of the new release refuses to
start (``StepRemovedError``) when some wait at a step that no live worker serves: they
would never run; with a live worker of the old release serving it, it starts, and says so.
"""

from __future__ import annotations

from typing import Any

import msgspec

from saga.state.errors import StepRemovedError
from saga.state.keys import GROUP, Keys
from saga.state.model import is_undo
from saga.state.presence import live_workers
from saga.state.queries import registered_steps
from saga.state.replies import text


class Stranded(msgspec.Struct, frozen=True):
    step: str
    waiting: int
    """Entries unread or pending on its ready streams, plus its delayed retries."""
    served: bool
    """A live worker of this saga type still serves it (one of an older release)."""


async def waiting_at(client: Any, keys: Keys, step: str) -> int:
    """What waits at ``step``: its groups' lag and pending entries and delayed retries,
    in every partition (one pipeline)."""
    pipe = client.pipeline(transaction=False)
    for p in keys.all_partitions():
        pipe.xinfo_groups(keys.ready(p, step))
        pipe.zcard(keys.delayed(p, step))
    replies = await pipe.execute(raise_on_error=False)
    total = 0
    for groups, delayed in zip(replies[::2], replies[1::2], strict=True):
        if isinstance(groups, list):  # an error: the stream does not exist
            for g in groups:
                if text(g.get("name")) == GROUP:
                    total += int(g.get("pending") or 0) + int(g.get("lag") or 0)
        if isinstance(delayed, int):
            total += delayed
    return total


async def removed_in_flight(client: Any, keys: Keys, steps: tuple[str, ...]) -> list[Stranded]:
    """The steps of ``keys``' saga type that some release registered, that ``steps`` (this
    release's) lack, and at which sagas wait."""
    gone = [s for s in await registered_steps(client, keys) if s not in steps and not is_undo(s)]
    if not gone:
        return []
    served = {s for w in await live_workers(client, keys) if w.saga_type == keys.saga_type
              for s in w.steps}  # fmt: skip
    found = []
    for step in gone:
        n = await waiting_at(client, keys, step)
        if n:
            found.append(Stranded(step, n, step in served))
    return found


def refuse_stranded(saga_type: str, found: list[Stranded]) -> None:
    """Raise StepRemovedError, in one sentence, if sagas wait at a step no one serves."""
    unserved = [s for s in found if not s.served]
    if not unserved:
        return
    first = unserved[0]
    others = f" (and at {', '.join(s.step for s in unserved[1:])})" if unserved[1:] else ""
    raise StepRemovedError(
        f"{first.waiting} saga(s) of type {saga_type!r} wait at step {first.step!r}{others}, "
        "which this release removed or renamed, and no live worker serves it; run a worker "
        f"of the previous release for {first.step!r} until `saga top` shows nothing there, "
        f"or `saga retry --step` them onto a step this release has"
    )
