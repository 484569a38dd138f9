"""The document pipeline as a saga type: ``router → parser → grouper``, type ``documents``.

The first user of ``saga.App``. The functions, their Structs and which step reads
or drops the pages blob are the steps layer's (``saga.steps.pipeline_steps``);
the order and each step's settings are declared here. The parser calls an LLM
and may be slow; the others are quick. ``SAGA_<STEP>_*`` override these values.
"""

from __future__ import annotations

from saga.api.app import App
from saga.state.keys import DEFAULT_TYPE
from saga.steps.pipeline_steps import STEPS

app = App(DEFAULT_TYPE)

_router, _parser, _grouper = STEPS

router = app.step(
    name=_router.name, timeout=120, lease=60, concurrency=8, retries=4, calls_models=False
)(_router.fn)
parser = app.step(
    name=_parser.name,
    after=router,
    timeout=600,
    lease=120,
    concurrency=4,
    retries=4,
    loads_pages=_parser.loads_pages,
    deletes_pages=_parser.deletes_pages,
)(_parser.fn)
grouper = app.step(
    name=_grouper.name, after=parser, timeout=300, lease=60, concurrency=8, retries=4
)(_grouper.fn)
