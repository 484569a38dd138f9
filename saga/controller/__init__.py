"""The controller: an executor with no steps.

One small always-on process (``saga controller``) that promotes due retries,
requeues entries idle past their lease, and keeps the streams trimmed for every
step of the pipeline, including steps whose workers KEDA scaled to zero; it
serves the queue gauges of every step, so they exist while no worker runs.
Workers do the same work for their own steps: every transition it uses is a
fenced, re-checked script, so two controllers and any number of workers can
run at once without doing anything twice (no leader election).
"""
