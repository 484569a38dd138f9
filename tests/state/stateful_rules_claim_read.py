"""The stateful test's claim-in-read rule: claim_steps reading a step's new entries itself
(state/claim_read.py), checked against the same model as a read then a claim. The rule
looks at the entries it will be given first (the unread tail of the stream), so it can
say what each reply must be, and that the script took exactly those."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import multiple, precondition, rule

from saga.state.claim_read import claim_read
from saga.state.machine import new_op
from saga.state.replies import ClaimOutcome, text
from tests.state.stateful_harness import CLAIMS, RedisMachine
from tests.state.stateful_model import STEPS, WORKERS, P


class ClaimReadRules(RedisMachine):
    async def _unread(self, step: str, count: int) -> list[tuple[str, str]]:
        """The next ``count`` entries XREADGROUP '>' would give: after the last delivered."""
        ready = self.keys.ready(0, step)
        last = text((await self.client.xinfo_groups(ready))[0]["last-delivered-id"])
        rows = await self.client.xrange(ready, f"({last}", "+", count=count)
        return [(text(i), text(f[b"rid"])) for i, f in rows]

    @precondition(lambda self: self._in(P))
    @rule(
        target=CLAIMS, worker=st.sampled_from(WORKERS), count=st.sampled_from([1, 2, 10]),
        capped=st.booleans(), compensable=st.booleans(),
    )  # fmt: skip
    def claim_in_read(self, worker: str, count: int, capped: bool, compensable: bool) -> Any:
        """A worker with a backlog claims each step's next ``count`` entries in the read."""
        issued = []
        for step in STEPS:
            ahead = self.run(self._unread(step, count + 1))
            entries = ahead[:count]

            async def claim(
                options: dict[str, Any], step: str = step, entries: list[Any] = entries
            ) -> list[ClaimOutcome]:
                outs, left = await claim_read(
                    self.sm, step, 0, count, after="0-0", op=new_op(), **options
                )
                assert left == [], left  # the model writes only the usual entries
                assert [(o.entry_id, o.record_id) for o in outs] == entries
                return outs

            issued += self._claim(
                step, entries, worker, "claim in read", capped=capped,
                compensable=compensable, claim_with=claim, backlog=len(ahead) > count,
            )  # fmt: skip
        return multiple(*issued)
