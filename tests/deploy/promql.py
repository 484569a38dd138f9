"""PromQL of the chart: every expression of the PrometheusRule and the Grafana dashboard,
parsed by PromQL's own grammar (promql-parser), and the metric names each one reads."""

from __future__ import annotations

import json
from typing import Any

import promql_parser

from tests.deploy.chart import merged, of_kind, render

# Grafana's variables, replaced by values a Prometheus query could hold.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "6h",
    "${top_users}": "10",
}
VALUES = {
    "metrics": {"prometheusRule": {"enabled": True}, "dashboard": {"enabled": True}},
}


def chart_expressions(values: dict[str, Any] | None = None) -> dict[str, str]:
    """Where -> expression, for every alert and every dashboard target the chart renders."""
    objs = render(merged(values or {}, VALUES))
    found: dict[str, str] = {}
    (rule,) = of_kind(objs, "PrometheusRule").values()
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            if "alert" in r:  # recording rules: upgrade_rules
                found[f"alert {r['alert']}"] = r["expr"]
    (cm,) = [c for name, c in of_kind(objs, "ConfigMap").items() if name.endswith("-dashboard")]
    dashboard = json.loads(cm["data"]["saga.json"])
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for var, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(var, value)
            found[f"panel {panel['title']!r} {target['refId']}"] = expr
    return found


def upgrade_rules(values: dict[str, Any] | None = None) -> dict[str, str]:
    """The chart's upgrade recording rules (``metrics.prometheusRule.upgradeRules``):
    recorded name -> the expression over the previous release's series."""
    objs = render(merged(values or {}, VALUES))
    (rule,) = of_kind(objs, "PrometheusRule").values()
    return {
        r["record"]: r["expr"]
        for group in rule["spec"]["groups"]
        if group["name"] == "saga-upgrade"
        for r in group["rules"]
    }


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (raises if it is not valid PromQL)."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def grouped_by(expr: str) -> list[set[str]]:
    """The label sets of every ``by (...)`` aggregation in an expression."""
    found: list[set[str]] = []

    def visit(node: Any) -> None:
        modifier = getattr(node, "modifier", None)
        is_by = modifier is not None and str(modifier).startswith("by")
        if isinstance(node, promql_parser.AggregateExpr) and is_by:
            found.append(set(modifier.labels))

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found
