"""A pipeline is data; steps from installed packages join through entry points."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from saga.api.pipeline import (
    Pipeline,
    StepRegistration,
    StepSpec,
    apply_overrides,
    discovered_registrations,
)
from saga.config.settings import load_settings
from saga.wiring.runtime import document_pipeline


class Doc(msgspec.Struct):
    n: int = 0


async def noop(ctx: object, inp: Doc) -> Doc:
    return inp


def spec(name: str) -> StepSpec:
    return StepSpec(name=name, fn=noop, input_type=Doc, output_type=Doc)


ENRICHER = StepRegistration(spec=spec("enricher"), after="parser")


def test_order_next_and_prev() -> None:
    """next_of/prev_of follow the order; the first step reads the saga's input."""
    p = Pipeline((spec("router"), spec("parser"), spec("grouper")))
    assert p.next_of("router") == "parser" and p.next_of("grouper") == ""
    assert p.prev_of("router") == "_input" and p.prev_of("grouper") == "parser"
    with pytest.raises(KeyError, match="unknown step 'nope'"):
        p.get("nope")


def test_duplicate_or_bad_step_names_are_refused() -> None:
    """Two steps with one name, or a name that cannot be a key part, are refused."""
    with pytest.raises(ValueError, match="duplicate"):
        Pipeline((spec("router"), spec("router")))
    with pytest.raises(ValueError, match="lowercase identifier"):
        spec("Bad Name")


def test_entry_point_adds_a_step_without_engine_changes(tmp_path: Path) -> None:
    """A distribution declaring a saga.steps entry point inserts its step after `parser`."""
    dist = tmp_path / "saga_enricher-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: saga-enricher\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[saga.steps]\nenricher = tests.runtime.test_pipeline:ENRICHER\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        assert [r.spec.name for r in discovered_registrations()] == ["enricher"]
        pipeline = document_pipeline(load_settings({"SAGA_DATA_DIR": str(tmp_path)}))
    finally:
        sys.path.remove(str(tmp_path))
    assert pipeline.names == ("router", "parser", "enricher", "grouper")


def test_settings_override_step_specs() -> None:
    """SAGA_<STEP>_* overrides change concurrency, attempts, timeout and lease."""
    env = {"SAGA_DATA_DIR": "/t", "SAGA_PARSER_CONCURRENCY": "2", "SAGA_PARSER_MAX_ATTEMPTS": "9",
           "SAGA_PARSER_TIMEOUT": "5", "SAGA_PARSER_LEASE": "3",
           "SAGA_PARSER_BACKOFF": "0.5"}  # fmt: skip
    p = apply_overrides(Pipeline((spec("router"), spec("parser"))), load_settings(env))
    parser = p.get("parser")
    assert (parser.concurrency, parser.retry.max_attempts) == (2, 9)
    assert (parser.timeout_s, parser.lease_s, parser.retry.base_s) == (5, 3, 0.5)
    assert p.get("router").concurrency == 8
