"""Moved to :mod:`datadojo.compare.judge_prompts` (answer comparison is a leaf that bench and reward both use; see docs/architecture.md); this path stays importable for code written before the move.

The module object is the same (``sys.modules`` alias), so monkeypatching either path patches both.
"""

import sys

from datadojo.compare import judge_prompts as _moved

sys.modules[__name__] = _moved
