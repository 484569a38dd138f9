"""``module:attr`` names an App (or a Pipeline, or a function returning one) for
``saga worker``, ``saga up`` and ``SAGA_PIPELINE``; a wrong one is one sentence."""

from __future__ import annotations

import pytest

from saga.api.pipeline import Pipeline
from saga.config.settings import SettingsError, load_settings
from saga.state.keys import Keys
from saga.wiring.runtime import document_pipeline, load_pipeline
from tests.cli.inspect_support import cli
from tests.executor import pipelines

SETTINGS = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_CHARGE_MAX_ATTEMPTS": "7"})


def test_an_app_a_pipeline_or_a_function_returning_one() -> None:
    """Each form loads as a checked pipeline of its type, with SAGA_<STEP>_* applied."""
    orders = load_pipeline("tests.app.apps:orders", SETTINGS)
    assert (orders.name, orders.get("charge").retry.max_attempts) == ("orders", 7)
    assert load_pipeline("tests.executor.pipelines:pipeline", SETTINGS).names == pipelines.STEPS
    assert isinstance(load_pipeline("tests.executor.pipelines:pipeline", SETTINGS), Pipeline)


def test_saga_pipeline_may_name_an_app() -> None:
    """SAGA_PIPELINE=module:app makes that App this deployment's type."""
    settings = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_PIPELINE": "tests.app.apps:refunds"})
    assert document_pipeline(settings).name == "refunds"


@pytest.mark.parametrize(
    ("ref", "sentence"),
    [
        ("tests.app.apps", "the app 'tests.app.apps' must be module:attribute, e.g. myapp:app"),
        ("tests.app.nope:app", "the app 'tests.app.nope:app' does not name module:attribute "
         "(No module named 'tests.app.nope')"),
        ("tests.app.apps:Order", "the app 'tests.app.apps:Order' is neither a saga.App nor a "
         "Pipeline"),
        ("tests.app.broken:app", "the app 'tests.app.broken:app': step 'seat' cannot take the "
         "output of 'book' (Ticket into Seat): Seat requires field 'row', which Ticket does not "
         "have"),
    ],
    ids=["no-colon", "no-module", "not-an-app", "type-mismatch"],
)  # fmt: skip
def test_a_wrong_reference_is_one_sentence(ref: str, sentence: str) -> None:
    """A missing module, a non-app or an app that does not build: SettingsError, its words."""
    with pytest.raises(SettingsError) as info:
        load_pipeline(ref, SETTINGS)
    assert str(info.value) == sentence


def test_saga_worker_refuses_a_broken_app_in_one_sentence(keys: Keys, redis_url: str) -> None:
    """`saga worker module:app` with an app that does not build exits 2, one line, no trace."""
    res = cli(keys, redis_url, "worker", "tests.app.broken:app")
    assert res.returncode == 2
    assert res.stderr.startswith("saga: the app 'tests.app.broken:app': step 'seat' cannot take")
    assert res.stderr.count("\n") == 1
    two = cli(keys, redis_url, "worker", "tests.app.apps:orders", "tests.app.apps:refunds")
    assert two.returncode == 2
    assert two.stderr == (
        "saga: a worker serves one saga type; run one worker per app (`saga up` starts them all)\n"
    )
    unknown = cli(keys, redis_url, "worker", "tests.app.apps:orders", "router", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr == "saga: unknown step(s) nope; the pipeline has router, charge, ship\n"
