"""How saga show and the console draw a type with branches, as pure functions: each
row names its parents, a parallel step is marked, and each running lane is a running
row of its own (the saga's own worker and claim time are empty while lanes run)."""

from __future__ import annotations

from saga.cli.branch_labels import step_labels
from saga.cli.timeline import layout
from saga.console.draw import timeline
from saga.state.model import EventType, HistoryEvent, Lane, Saga, SagaState

GRAPH = (("intake", ()), ("fraud", ("intake",)), ("coverage", ("intake",)),
         ("decide", ("fraud", "coverage")))  # fmt: skip
LANES = ("fraud", "coverage")


def test_labels_name_parents_and_mark_parallel_steps() -> None:
    """ASCII when piped, the terminal's marks on a TTY; a chain gets no labels."""
    plain = step_labels(GRAPH, LANES, fancy=False)
    assert plain == {"intake": "intake", "fraud": "|| fraud <- intake",
                     "coverage": "|| coverage <- intake",
                     "decide": "decide <- fraud, coverage"}  # fmt: skip
    assert step_labels(GRAPH, LANES, fancy=True)["fraud"] == "∥ fraud ← intake"
    assert step_labels((), (), fancy=False) == {}


def _running_saga() -> tuple[Saga, list[HistoryEvent]]:
    saga = Saga(v=1, record_id="c1", user_id="u1", state=SagaState.RUNNING, step="fraud", epoch=1,
                created_ms=1_000, updated_ms=1_500, claimed_ms=1_000,
                attempts={"intake": 1, "fraud": 1, "coverage": 1},
                lanes=(Lane(step="fraud", state="running", worker="w1", claimed_ms=1_200),
                       Lane(step="coverage", state="running", worker="w2",
                            claimed_ms=1_300)))  # fmt: skip
    events = [
        HistoryEvent(id="1-0", event=EventType.STARTED, at_ms=1_000, step="intake", epoch=1),
        HistoryEvent(id="2-0", event=EventType.COMMITTED, at_ms=1_100, step="intake", epoch=1,
                     attempt=1, worker="w1", duration_ms=100, next_step="fraud,coverage"),
    ]  # fmt: skip
    return saga, events


def test_each_running_lane_is_its_own_row() -> None:
    """Both lanes show as running rows with their own workers, labelled as branches."""
    saga, events = _running_saga()
    _, rows = layout(saga, events, 2_000, fancy=False, columns=None,
                     labels=step_labels(GRAPH, LANES, fancy=False))  # fmt: skip
    running = [(r[0], r[3]) for r in rows if "running" in r[6]]
    assert running == [("|| fraud <- intake", "w1"), ("|| coverage <- intake", "w2")]
    drawn = timeline(saga, events, 2_000, step_labels(GRAPH, LANES, fancy=True))
    assert [r.step for r in drawn if r.outcome == "running"] == [
        "∥ fraud ← intake", "∥ coverage ← intake",
    ]  # fmt: skip
