"""The grouping evaluation: the labelled set's shape, the pair arithmetic, both groupers'
figures, and ``saga eval --grouping`` as a real process (stand-in vectors, and a
"real" model served by a local OpenAI-compatible server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from saga.cli import shapes
from saga.evaluation.grouping import evaluate_grouping, score_grouper
from saga.evaluation.grouping_truth import LabelledName, labelled_names
from saga.steps.config import StepConfig
from tests.adapters.support import embeddings_reply, serve


def test_labelled_set_is_broad() -> None:
    """At least 100 unique names, English and German, every analyte with several names."""
    names = labelled_names()
    assert len(names) >= 100 and len({n.name for n in names}) == len(names)
    by_group: dict[str, int] = {}
    for n in names:
        by_group[n.group] = by_group.get(n.group, 0) + 1
    assert min(by_group.values()) >= 3 and len(by_group) >= 30
    written = {n.name for n in names}
    assert {"Blutzucker", "Harnsäure", "Thrombozyten", "Gluocse", "Hcy"} <= written


def case(*rows: tuple[str, str]) -> list[LabelledName]:
    return [LabelledName(name=n, unit="%", group=g) for n, g in rows]


@pytest.mark.anyio
async def test_pairs_are_counted_as_defined() -> None:
    """HbA1c/A1C found (1 of 2 true pairs), Zinc/Zn missed: precision 1, recall 0.5."""
    score = await score_grouper(
        case(("HbA1c", "a1c"), ("A1C", "a1c"), ("Zinc", "zinc"), ("Zn", "zinc")),
        StepConfig(),
        None,
    )
    assert (score.true_pairs, score.found_pairs, score.correct_pairs) == (2, 1, 1)
    assert (score.precision, score.recall, score.wrong_merges) == (1.0, 0.5, [])


@pytest.mark.anyio
async def test_a_wrong_merge_is_reported_by_name() -> None:
    """Two names the truth keeps apart but the grouper joins lower precision and are named."""
    score = await score_grouper(case(("HbA1c", "x"), ("A1C", "y")), StepConfig(), None)
    assert score.precision == 0.0
    [wrong] = score.wrong_merges
    assert (wrong.a, wrong.b, wrong.a_group, wrong.b_group) == ("HbA1c", "A1C", "x", "y")


@pytest.mark.anyio
async def test_figures_on_the_labelled_set() -> None:
    """No grouper merges two analytes; embeddings (stand-in) find more pairs than offline."""
    report = await evaluate_grouping(0.9)
    offline, embedded = report.scores
    assert offline.wrong_merges == [] == embedded.wrong_merges
    assert embedded.recall > offline.recall > 0.5
    assert embedded.model == "ngram-stand-in" and embedded.warnings == []


def saga_eval(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("SAGA_")}
    full.update(LITELLM_LOCAL_MODEL_COST_MAP="True", NO_COLOR="1", **env)
    return subprocess.run(
        [sys.executable, "-m", "saga.cli.main", "eval", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=180,
        check=False,
    )


def test_cli_prints_both_groupers_and_valid_json() -> None:
    """The table names both groupers and says the vectors are a stand-in; --json validates."""
    done = saga_eval("--grouping")
    assert done.returncode == 0, done.stderr
    assert "offline" in done.stdout and "stand-in vectors" in done.stdout
    done = saga_eval("--grouping", "--json", "--threshold", "0.6")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    schema = json.loads((shapes.SCHEMAS / "eval-grouping.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    assert [s["threshold"] for s in report["scores"]] == [0.0, 0.6]


def test_cli_with_a_model_served_locally_matches_the_stand_in() -> None:
    """--embedding-model goes through litellm to the server (counted there); served the
    stand-in vectors, it gives the stand-in's figures."""
    with serve(embeddings_reply) as stub:
        done = saga_eval(
            "--grouping", "--json", "--embedding-model", "openai/text-embedding-3-small",
            SAGA_LLM_API_KEY="sk-eval", SAGA_LLM_API_BASE=f"{stub.url}/v1",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stub.count("/v1/embeddings") == 1 and stub.requests[0].bearer == "sk-eval"
    served = json.loads(done.stdout)["scores"][1]
    stand_in = json.loads(saga_eval("--grouping", "--json").stdout)["scores"][1]
    assert served["model"] == "openai/text-embedding-3-small"
    assert (served["precision"], served["recall"]) == (stand_in["precision"], stand_in["recall"])


def test_cli_usage_errors_exit_2() -> None:
    """A directory with --grouping, no directory without it, a model without a key: exit 2."""
    for args in (["--grouping", "/tmp"], [], ["--grouping", "--embedding-model", "m"]):
        done = saga_eval(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)


def test_cli_reports_a_dead_model_and_exits_1() -> None:
    """An unreachable model: offline figures for both, the reason, exit 1."""
    done = saga_eval(
        "--grouping", "--embedding-model", "openai/text-embedding-3-small",
        SAGA_LLM_API_KEY="sk-eval", SAGA_LLM_API_BASE="http://127.0.0.1:9/v1",
    )  # fmt: skip
    assert done.returncode == 1 and "warning (embedding)" in done.stdout
