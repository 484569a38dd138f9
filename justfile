# Common tasks. Run them through ./dev (which sets up .venv first), e.g. ./dev test

set shell := ["bash", "-euo", "pipefail", "-c"]

# Lint, format check, type check, then the whole test suite in parallel processes
# (SAGA_TEST_WORKERS of them, 4 by default: most tests wait on servers and workers;
# 0 runs it in one process). A test file runs in one process, so its module-scoped
# fixtures (a browser stack, a bench run) are set up once.
test *args: lint typecheck
    LITELLM_LOCAL_MODEL_COST_MAP=True pytest -q -n "${SAGA_TEST_WORKERS:-4}" --dist loadfile {{args}}

# The end-to-end demo: embedded server, workers for every step, sample PDFs
demo:
    LITELLM_LOCAL_MODEL_COST_MAP=True saga demo

# ruff lint and format check
lint:
    ruff check .
    ruff format --check .

# Static types (mypy, strict)
typecheck:
    mypy

# Reformat and autofix
fmt:
    ruff format .
    ruff check --fix .

# Throughput benchmark against the references (N sagas)
bench n="1000":
    LITELLM_LOCAL_MODEL_COST_MAP=True saga bench --sagas {{n}}

# Build the wheel into dist/
wheel:
    python -m build --wheel --outdir dist .

# Tests touching redis-py's and the OTLP exporter's internals, at the lowest and the
# highest allowed versions (a venv each under .matrix/, made with uv; needs PyPI; ~1 min)
deps-matrix *ends:
    .ci/deps-matrix {{ends}}

# Long soak and chaos runs
soak:
    LITELLM_LOCAL_MODEL_COST_MAP=True SAGA_SOAK=1 pytest -q -m slow

# Lock the image's dependencies and build tools, with hashes (deploy/*.lock)
lock:
    uv pip compile pyproject.toml --extra otlp --extra console --universal --python-version 3.11 --generate-hashes --custom-compile-command "just lock" -o deploy/requirements.lock
    uv pip compile deploy/build.in --universal --python-version 3.11 --generate-hashes --custom-compile-command "just lock" -o deploy/build.lock
