"""The stateful test's lifecycle rule: a saga is exported (``archive.read_saga``), every
key and index entry of it deleted, and imported back (``import_record.lua``) while the
machine runs — whatever state it is in, with its queue entries left where they were.
Every invariant must still hold after it, and every later transition behave as if the
saga had never left: the export carries the whole saga (its op id, its epoch, its
lease, its retention) and the import writes exactly it back."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from saga.state.archive import read_saga
from saga.state.archive_import import ImportReport, import_one
from saga.state.model import SagaState
from tests.state.stateful_fairness import USERS
from tests.state.stateful_harness import RedisMachine
from tests.state.stateful_model import RECORDS


class LifecycleRules(RedisMachine):
    @precondition(lambda self: any(m.state and not m.gone for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS))
    def export_and_import(self, rid: str) -> None:
        m = self.model[rid]
        if not m.state or m.gone:
            return
        k = self.keys
        doc = self.run(read_saga(self.client, k, rid))
        assert doc is not None and doc.state == m.state
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(k.saga(rid), k.history(rid))
        for index in (k.created_index(0), k.review_index(0), k.user_index(0, USERS[rid])):
            pipe.zrem(index, rid)
        for state in SagaState:
            pipe.zrem(k.state_index(0, state), rid)
        pipe.zrem(k.retired(0), f"{USERS[rid]}|{rid}")
        self.run(pipe.execute())
        report = ImportReport()
        self.run(import_one(self.client, k, doc, report, "op-import"))
        assert report.imported == 1
        assert self.run(read_saga(self.client, k, rid)) == doc
