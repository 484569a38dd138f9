"""``saga eval`` as a real process: its table, its JSON and its exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec

from saga.evaluation.truth import ExpectedResult, dump_truth
from tests.corpus.sheet import Sheet, rows

CLEAN = rows("""
Glucose | = | 92 | 92 | mg/dL | 70-99 | | normal
Sodium | = | 139 | 139 | mmol/L | 135-145 | | normal
Potassium | = | 4.1 | 4.1 | mmol/L | 3.5-5.1 | | normal
""")


def write_clean_report(directory: Path, *, glucose_truth: float = 92) -> None:
    """A plain aligned table; its truth says Glucose is ``glucose_truth``."""
    sheet = Sheet("clean_table", "a plain aligned table")
    sheet.new_page()
    sheet.line("Test Laboratory", bold=True)
    widths = (60, 24, 24, 30)
    sheet.cells(zip(widths, ("Test", "Result", "Units", "Reference"), strict=True), bold=True)
    for r in CLEAN:
        sheet.cells(zip(widths, (r.name, r.text, r.unit, r.ref), strict=True))
        sheet.record(r)
    pdf, truth = sheet.finish()
    first: ExpectedResult = msgspec.structs.replace(truth.results[0], value=glucose_truth)
    truth = msgspec.structs.replace(truth, results=[first, *truth.results[1:]])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / truth.document).write_bytes(pdf)
    (directory / f"{truth.layout}.truth.json").write_bytes(dump_truth(truth))


def saga_eval(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "saga.cli.main", "eval", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_eval_passes_on_a_report_read_right(tmp_path: Path) -> None:
    """Every row exact: a table with the layout's figures, all gates ok, exit 0."""
    write_clean_report(tmp_path)
    done = saga_eval(str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("clean_table"))
    assert line.split()[1:6] == ["3", "3", "0", "0", "0"]
    assert "exact recall 100.0%" in done.stdout


def test_eval_fails_on_a_wrong_value_and_says_which(tmp_path: Path) -> None:
    """Truth says 93, the page says 92: one wrong value, the gate fails, exit 1."""
    write_clean_report(tmp_path, glucose_truth=93)
    done = saga_eval(str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "clean_table: WRONG p1: expected 'Glucose: 92 [93] mg/dL'" in done.stdout


def test_eval_json_is_one_document(tmp_path: Path) -> None:
    """--json prints the report as JSON: documents, total, gates and the verdict."""
    write_clean_report(tmp_path, glucose_truth=93)
    done = saga_eval(str(tmp_path), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False
    assert report["total"]["wrong"] == 1
    assert [d["layout"] for d in report["documents"]] == ["clean_table"]
    assert {g["name"] for g in report["gates"]} >= {"wrong values", "exact recall"}


def test_eval_usage_errors_exit_2_with_one_sentence(tmp_path: Path) -> None:
    """A missing directory, an empty one, a recall over 1: exit 2, one sentence, no traceback."""
    missing = tmp_path / "missing"
    sentences = {}
    for args in ([str(missing)], [str(tmp_path)], [str(tmp_path), "--min-recall", "2"]):
        done = saga_eval(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr
        sentences[args[-1]] = done.stderr.strip().splitlines()[-1]
    assert sentences[str(missing)] == (
        f"saga: {missing} is not a directory; build one with python -m tests.corpus.build DIR."
    )
    assert sentences[str(tmp_path)] == f"saga: {tmp_path} holds no *.truth.json files."
    assert sentences["2"] == (
        "saga eval: argument --min-recall: 2 is not between 0 and 1; see `saga eval --help`."
    )


def test_eval_json_names_the_unverified_values_per_document(tmp_path: Path) -> None:
    """A value under a name the analyte table does not know is kept unverified: --json counts
    it per document and names it (the name only), and the total sums the counts."""
    lab = rows("""
Sodium | = | 139 | 139 | mmol/L | 135-145 | | normal
Zonulin | = | 48 | 48 | ng/mL | 0-55 | | normal
""")
    sheet = Sheet("own_analyte", "a lab's own analyte")
    sheet.new_page()
    widths = (60, 24, 24, 30)
    sheet.cells(zip(widths, ("Test", "Result", "Units", "Reference"), strict=True), bold=True)
    for r in lab:
        sheet.cells(zip(widths, (r.name, r.text, r.unit, r.ref), strict=True))
        sheet.record(r)
    pdf, truth = sheet.finish(expect_review=True)
    (tmp_path / truth.document).write_bytes(pdf)
    (tmp_path / f"{truth.layout}.truth.json").write_bytes(dump_truth(truth))
    done = saga_eval(str(tmp_path), "--json")
    report = json.loads(done.stdout)
    (document,) = report["documents"]
    assert (document["unverified"], document["unverified_names"]) == (1, ["Zonulin"])
    assert report["total"]["unverified"] == 1
