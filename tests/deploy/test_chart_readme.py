"""The chart's README is generated from the values' comments and kept in sync; every
value is documented; the chart carries its icon and its Kubernetes range."""

from __future__ import annotations

import base64
import importlib.util
from types import ModuleType

import yaml

from tests.deploy.chart import CHART, REPO


def generator() -> ModuleType:
    path = REPO / "deploy" / "helm" / "chart_readme.py"
    spec = importlib.util.spec_from_file_location("chart_readme", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_generated_from_the_values() -> None:
    """README.md equals what deploy/helm/chart_readme.py writes (run it after editing values)."""
    gen = generator()
    assert (CHART / "README.md").read_text() == gen.render(), (
        "deploy/helm/saga/README.md is out of date: run python deploy/helm/chart_readme.py"
    )
    assert gen.main(["--check"]) == 0


def test_every_value_has_a_description() -> None:
    """Each row of the values table says what the value does."""
    gen = generator()
    text = (CHART / "values.yaml").read_text()
    rows = gen.rows(yaml.safe_load(text), gen.comments(text.splitlines()))
    assert len(rows) > 100
    assert [key for key, _, _, doc in rows if not doc] == []


def test_comments_belong_to_the_key_below_them() -> None:
    """A comment block documents the next key, nested keys by path, list items never."""
    gen = generator()
    text = "# top\na:\n  # inner\n  b: 1\n  c: 2\n# list\nd:\n  - e: 1\n# after\nf: 3\n"
    assert gen.comments(text.splitlines()) == {
        ("a",): "top",
        ("a", "b"): "inner",
        ("d",): "list",
        ("f",): "after",
    }
    rows = gen.rows(yaml.safe_load(text), gen.comments(text.splitlines()))
    assert [r[0] for r in rows] == ["a", "a.b", "a.c", "d", "f"]
    assert [r[3] for r in rows] == ["top", "inner", "", "list", "after"]


def test_chart_metadata_has_icon_and_kubernetes_range() -> None:
    """Chart.yaml inlines icon.svg and states the Kubernetes versions it supports."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    prefix = "data:image/svg+xml;base64,"
    assert chart["icon"].startswith(prefix)
    assert base64.b64decode(chart["icon"][len(prefix) :]) == (CHART / "icon.svg").read_bytes()
    assert chart["kubeVersion"] == ">=1.25.0-0"
