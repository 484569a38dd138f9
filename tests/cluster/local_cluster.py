"""The local cluster the tests start: ``saga.bench.local_cluster`` (shared with
``saga bench --cluster``)."""

from saga.bench.local_cluster import SLOTS, LocalCluster

__all__ = ["SLOTS", "LocalCluster"]
