"""Moved to :mod:`datadojo.protocol.messages` (the messages form of a trajectory belongs with its dialects); this path stays importable for code written before the move.

The module object is the same (``sys.modules`` alias), so monkeypatching either path patches both.
"""

import sys

from datadojo.protocol import messages as _moved

sys.modules[__name__] = _moved
