"""``datadojo demo``: the whole pipeline on the bundled example data, with no model and no network.

* :mod:`.examples` — find the ``examples`` folder, generate its data when absent;
* :mod:`.pipeline` — the stages (:func:`run_demo`), timed, with progress;
* :mod:`.result` — what the demo did (:class:`DemoResult`, a :class:`StageResult` per stage);
* :mod:`.page` — ``OUT/report.html``, the page that links everything.

From Python::

    from datadojo.demo import DemoConfig, run_demo
    result = run_demo(DemoConfig(out="runs/demo"))
    print(result.report, result.stage("text2sql").figures["execution_accuracy"])
"""

from datadojo.demo.examples import EXAMPLE_SOURCES, DemoError, ExampleData, ensure_example_data, find_examples
from datadojo.demo.pipeline import STAGES, DemoConfig, DemoProgress, DemoResult, StageResult, run_demo

__all__ = [
    "EXAMPLE_SOURCES",
    "STAGES",
    "DemoConfig",
    "DemoError",
    "DemoProgress",
    "DemoResult",
    "ExampleData",
    "StageResult",
    "ensure_example_data",
    "find_examples",
    "run_demo",
]
