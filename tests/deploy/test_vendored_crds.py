"""The vendored KEDA CRDs are the ones the steering shared/ holds."""

from __future__ import annotations

import pytest

from tests.deploy.chart import KEDA_CRDS, SHARED_K8S, VENDORED_K8S


@pytest.mark.parametrize("name", sorted(KEDA_CRDS.values()))
def test_vendored_crd_matches_shared(name: str) -> None:
    """deploy/crds/keda holds the same bytes as ../shared/k8s (when that copy exists)."""
    vendored = (VENDORED_K8S / name).read_bytes()
    shared = SHARED_K8S / name
    if shared.is_file():
        assert vendored == shared.read_bytes()
    assert b"openAPIV3Schema" in vendored
