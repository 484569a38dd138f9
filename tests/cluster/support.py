"""What the cluster tests share: the test pipeline's steps and a worker's environment."""

from __future__ import annotations

import os
from pathlib import Path

from saga.state.keys import Keys
from tests.cluster.local_cluster import LocalCluster
from tests.executor.support import REPO

STEPS = ("router", "parser", "grouper")


def env_for(cluster: LocalCluster, keys: Keys, tmp_path: Path) -> dict[str, str]:
    """A `saga worker`'s environment: the cluster, this test's prefix, fast loops."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGA_")}
    env.update(
        REDIS_URL=cluster.url,
        SAGA_REDIS_CLUSTER="1",
        SAGA_KEY_PREFIX=keys.prefix,
        SAGA_PARTITIONS=str(keys.partitions),
        SAGA_DATA_DIR=str(tmp_path / "saga-data"),
        SAGA_PIPELINE="tests.executor.pipelines:pipeline",
        SAGA_LOG_FORMAT="json",
        SAGA_BLOCK_MS="100",
        SAGA_PROMOTE_INTERVAL="0.1",
        PYTHONPATH=str(REPO),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONUNBUFFERED="1",
    )
    return env
