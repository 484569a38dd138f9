"""Render the Helm chart offline with a real Helm (Helm's Go SDK, bundled in the
``helm-python-sdk`` wheel) and validate what it renders.

No cluster and no network: ``Chart.render`` runs Helm's own template engine
and values-schema check in process; ``kubernetes-validate`` carries the
Kubernetes OpenAPI schemas; KEDA's CRDs come from ``../shared/k8s`` next to
the repository.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "saga"
EXAMPLES = CHART / "examples"
SHARED_K8S = REPO.parent / "shared" / "k8s"
VENDORED_K8S = REPO / "deploy" / "crds" / "keda"
RELEASE = "rel"
NAMESPACE = "saga"

# Kubernetes versions the core objects must be valid for: the oldest the chart
# supports and the newest schema kubernetes-validate bundles.
K8S_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())

KEDA_CRDS = {
    "ScaledObject": "keda.sh_scaledobjects.yaml",
    "TriggerAuthentication": "keda.sh_triggerauthentications.yaml",
}
# Kinds whose schema is neither in Kubernetes nor in shared/k8s.
UNCHECKED_KINDS = {"ServiceMonitor", "PrometheusRule"}


def example(name: str) -> dict[str, Any]:
    """The values of examples/<name>.yaml."""
    data = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` deep-merged with ``override`` (as helm merges values files)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@functools.cache
def _render_cached(values_json: str) -> tuple[tuple[str, str], ...]:
    with helm.Chart.load(CHART) as chart:
        out = chart.render(
            json.loads(values_json), name=RELEASE, namespace=NAMESPACE, is_install=True
        )
    return tuple(sorted(out.items()))


def render_text(values: dict[str, Any]) -> dict[str, str]:
    """Template path -> rendered text, exactly as `helm template` would produce."""
    return dict(_render_cached(json.dumps(values, sort_keys=True)))


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Kubernetes object the chart renders with ``values``."""
    objects: list[dict[str, Any]] = []
    for path, text in render_text(values).items():
        if not path.endswith((".yaml", ".yml")):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Objects of one kind by name."""
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def validate_core(obj: dict[str, Any]) -> None:
    """Strict validation against the Kubernetes schemas (unknown fields fail)."""
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


def shared_k8s_dir() -> Path:
    """KEDA's CRDs: the copy vendored in deploy/crds/keda (test_vendored_crds checks it
    against ../shared/k8s when that is present), or a failure saying where it looked."""
    if not all((VENDORED_K8S / f).is_file() for f in KEDA_CRDS.values()):
        pytest.fail(f"KEDA CRDs not found in {VENDORED_K8S} ({', '.join(KEDA_CRDS.values())})")
    return VENDORED_K8S


def _forbid_unknown(node: Any) -> None:
    """Make a CRD schema strict: every object that lists properties allows only those."""
    if isinstance(node, dict):
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _forbid_unknown(value)
    elif isinstance(node, list):
        for value in node:
            _forbid_unknown(value)


@functools.cache
def keda_validator(kind: str) -> jsonschema.protocols.Validator:
    """A strict validator for a KEDA kind, from its CRD's openAPIV3Schema."""
    crd = yaml.safe_load((shared_k8s_dir() / KEDA_CRDS[kind]).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    _forbid_unknown(schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def validate_keda(obj: dict[str, Any]) -> None:
    """Strict validation of a KEDA object against its CRD; raises with every error."""
    assert obj["apiVersion"] == "keda.sh/v1alpha1"
    errors = sorted(keda_validator(obj["kind"]).iter_errors(obj), key=str)
    if errors:
        lines = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
        raise AssertionError(f"{obj['kind']} {obj['metadata']['name']}:\n" + "\n".join(lines))


def lint(values: dict[str, Any]) -> list[str]:
    """`helm lint --strict` findings at warning level or worse."""
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
    bad = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]
    return bad + list(report["errors"])


def schema_error(values: dict[str, Any]) -> str:
    """Helm's message when ``values`` fail values.schema.json (fails if they pass)."""
    with helm.Chart.load(CHART) as chart:
        try:
            chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        except helm.HelmValuesError as exc:
            return str(exc)
    pytest.fail(f"values were accepted: {values}")


def render_error(values: dict[str, Any]) -> str:
    """Helm's message when a template refuses ``values`` (fails if it renders)."""
    with helm.Chart.load(CHART) as chart:
        try:
            chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        except helm.HelmRenderError as exc:
            return str(exc)
    pytest.fail(f"values rendered: {values}")


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a Deployment, Job or bare Pod."""
    spec: dict[str, Any] = workload["spec"]
    return spec if workload["kind"] == "Pod" else spec["template"]["spec"]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    """The one container of a Deployment, Job or Pod."""
    (only,) = pod_spec(workload)["containers"]
    return only


def env_of(ctr: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A container's env entries by name."""
    return {e["name"]: e for e in ctr.get("env", [])}
