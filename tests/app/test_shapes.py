"""Wait steps with a real ``saga worker module:app`` process and a real server: a saga
parks at ``@app.wait`` with no worker held; ``saga signal`` (the CLI) and
``client.signal`` move it on with the signal's data; a duplicate id is a no-op; a
timeout takes the declared default; a sleep wakes at the time its input says, within
about a second; bad CLI input is one sentence and exit 2."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from saga.api.pipeline import AppError
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.shapes_apps import Doc, reviews
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio
APP = "tests.app.shapes_apps:reviews"


async def _state(redis: Any, keys: Keys, rid: str, want: str, within: float = 60) -> None:
    async def reached() -> bool:
        return await states(redis, keys, [rid]) == [want]

    await wait_until(reached, within=within, what=f"{rid} to be {want}", every=0.05)


async def test_a_wait_parks_until_signalled_and_a_duplicate_is_a_no_op(
    spawn: SpawnWorker, settings: Settings, redis: Any, redis_url: str
) -> None:
    """The saga waits at 'approved' (no lease); the CLI's signal carries the data to
    publish; the same id again changes nothing; client.signal works the same way, and a
    signal sent before the saga gets to its wait is consumed there."""
    worker = spawn(APP)
    await worker.wait_ready(within=120)
    async with reviews.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("d1", "u1", input=Doc(title="T1"))
        await _state(redis, k, "d1", "waiting")
        saga = await sagas.get("d1")
        assert (saga.step, saga.token, saga.worker) == ("approved", "", "")
        assert saga.due_ms > time.time() * 1000 + 3_000_000  # the hour's timeout, in Redis
        top = cli_json(k, redis_url, "top", "--once", "--type", "reviews")
        assert top["timers"] == 1  # saga top counts the parked saga's timer
        listed = cli_json(k, redis_url, "list", "--state", "waiting", "--type", "reviews")
        assert [r["record_id"] for r in listed["sagas"]] == ["d1"]
        data = '{"by":"ann","title":"T1"}'
        out = cli_json(k, redis_url, "signal", "d1", "approved", "--data", data, "--id", "s1",
                       "--type", "reviews")  # fmt: skip
        assert (out["outcome"], out["next_step"]) == ("consumed", "publish")
        again = cli(k, redis_url, "signal", "d1", "approved", "--id", "s1", "--type", "reviews")
        assert again.returncode == 0 and "already delivered" in again.stdout
        await _state(redis, k, "d1", "completed")
        saga, events = await saga_and_history(redis, k, "d1")
        assert msgspec.json.decode(saga.outputs["archive"]) == {"title": "T1", "by": "ann"}
        assert [e.event for e in events].count(EventType.SIGNALLED) == 1

        await sagas.start("d2", "u1", input=Doc(title="T2"))
        early = await sagas.signal("d2", "approved", data={"by": "bob", "title": "T2"})
        assert early.outcome in ("kept", "consumed")
        await _state(redis, k, "d2", "completed")
        saga, _ = await saga_and_history(redis, k, "d2")
        assert msgspec.json.decode(saga.outputs["approved"])["by"] == "bob"


async def test_a_timeout_takes_the_default_and_a_sleep_wakes_on_time(
    spawn: SpawnWorker, settings: Settings, redis: Any, base_env: dict[str, str]
) -> None:
    """With no signal the one-second timeout goes on with the default approval; the sleep
    wakes at its input's time; each timer fires within a few promote passes of being due."""
    wake_at = time.time() + 3
    worker = spawn(APP, REVIEW_TIMEOUT="1", WAKE_AT=str(wake_at))
    await worker.wait_ready(within=120)
    async with reviews.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("d3", "u1", input=Doc(title="T3"))
        await _state(redis, k, "d3", "completed", within=30)
        saga, events = await saga_and_history(redis, k, "d3")
    assert msgspec.json.decode(saga.outputs["archive"]) == {"title": "", "by": "nobody"}
    parked = [e for e in events if e.event == EventType.WAITING]
    fired = [e for e in events if e.event == EventType.WAIT_TIMED_OUT]
    assert [e.step for e in parked] == ["approved", "nap"] and [e.step for e in fired] == [
        "approved", "nap",
    ]  # fmt: skip
    assert parked[1].due_ms == int(wake_at * 1000)
    # A timer fires on a promote pass; on a loaded 2-core box a pass can lag, hence 30
    # intervals (3 s at the tests' 0.1 s). A saga parked past its wake time (a slow worker
    # start) is due when it parks, not before.
    late_ms = 30 * 1000 * float(base_env["SAGA_PROMOTE_INTERVAL"])
    for p, f in zip(parked, fired, strict=True):
        assert 0 <= f.at_ms - max(p.due_ms, p.at_ms) < late_ms, (p, f)


def test_bad_signal_input_is_one_sentence_and_exit_2(keys: Keys, redis_url: str) -> None:
    """--data that is not a JSON object is refused before anything is sent."""
    res = cli(keys, redis_url, "signal", "d1", "approved", "--data", "[1", "--type", "reviews")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "not valid JSON" in res.stderr
    assert "Traceback" not in res.stderr


async def test_a_signal_for_an_event_the_type_never_waits_for_is_refused(
    settings: Settings, redis: Any, redis_url: str
) -> None:
    """saga signal with a misspelt event: one sentence naming the type's events, exit 2,
    nothing kept (the saga would otherwise keep it for a wait that never comes)."""
    async with reviews.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("d9", "u1", input=Doc(title="T9"))
        before = await redis.hgetall(k.saga("d9"))
        res = cli(k, redis_url, "signal", "d9", "aproved", "--type", "reviews")
        assert res.returncode == 2, res
        assert res.stderr.strip().count("\n") == 0 and "Traceback" not in res.stderr
        assert "never waits for event 'aproved' (its events: approved)" in res.stderr
        assert await redis.hgetall(k.saga("d9")) == before


def test_the_docs_example_builds_as_written() -> None:
    """docs/sagas.md's review.py defines a type whose chain has the wait and the sleep."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sagas.md").read_text()
    code = re.search(r"```python\n(# review\.py\n.*?)```", doc, re.S)
    assert code, "docs/sagas.md lost its review.py example"
    scope: dict[str, Any] = {"__name__": "review"}
    exec(compile(code.group(1), "review.py", "exec"), scope)
    built = scope["app"].build()
    assert built.names == ("draft", "approved", "stamp", "hold", "publish")
    assert [s.wait is not None for s in built.steps] == [False, True, False, True, False]


class _In(msgspec.Struct):
    x: int = 0


async def first(ctx: Any, inp: _In) -> _In:
    return inp


@pytest.mark.parametrize(
    ("declare", "says"),
    [
        (lambda a: a.wait(event="ok", after=first)(dict), "msgspec Struct"),
        (lambda a: a.wait(event="Not-An-Id")(_In), "lowercase identifier"),
        (lambda a: a.wait(event="ok", on_timeout="later")(_In), "must be one of"),
        (lambda a: a.wait(event="ok", on_timeout="default")(_In), "needs a timeout="),
        (
            lambda a: a.wait(event="ok", timeout=5, on_timeout="default", default={"x": "no"})(_In),
            "default= the fields",
        ),
        (lambda a: a.wait(event="ok", timeout=-1)(_In), "more than 0 seconds"),
        (lambda a: a.wait(event="ok", default={"x": 1})(_In), "only with on_timeout='default'"),
        (lambda a: a.sleep("nap", after=first), "either seconds= or until="),
        (lambda a: a.sleep("nap", after=first, seconds=1, until="t"), "not both"),
    ],
)
def test_a_wait_declared_wrong_is_one_sentence(declare: Any, says: str) -> None:
    """Each mistake in @app.wait / app.sleep is an AppError saying what to write."""
    app = saga_app()
    with pytest.raises(AppError, match=re.escape(says)):
        declare(app)


def test_a_wait_last_or_a_sleep_first_is_refused_when_built() -> None:
    """A wait needs a step after it; a sleep has no input to pass on as the first step."""
    app = saga_app()
    app.wait(event="ok", after=first)(_In)
    with pytest.raises(AppError, match="is the last step"):
        app.build()
    import saga

    other = saga.App("sleeps")
    other.sleep("nap", seconds=1)
    other.step(after="nap", name="then")(first)
    with pytest.raises(AppError, match="cannot be the first step"):
        other.build()


def test_a_sleep_passes_its_input_type_on() -> None:
    """The step after a sleep must take what the step before it gave (checked at build)."""
    app = saga_app()

    async def wants_doc(ctx: Any, d: Doc) -> Doc:
        return d

    app.sleep("nap", after=first, seconds=1)
    app.step(after="nap")(wants_doc)
    with pytest.raises(AppError, match="cannot take the output of 'nap'"):
        app.build()


def saga_app() -> Any:
    import saga

    app = saga.App("waits")
    app.step()(first)
    return app
