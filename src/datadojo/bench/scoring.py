"""Moved to :mod:`datadojo.eval.scoring` (scoring prediction files sits above the benchmarks it scores, beside
the metrics it reports); this path stays importable for code written before the move.

The module object is the same (``sys.modules`` alias), so monkeypatching either path patches both.
"""

import sys

from datadojo.eval import scoring as _moved

sys.modules[__name__] = _moved
