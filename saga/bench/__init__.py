"""``saga bench``: throughput, latency and Redis cost per transition of the engine,
side by side with the seed's protocol and a minimal floor, in one run."""
