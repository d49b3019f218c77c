"""Helpers shared by the test suites (not tests themselves).

* :mod:`helpers.procs` — processes: live descendants (the sandbox worker's own ``/proc`` reading), processes
  of a uid or with a command line, waiting for processes to go;
* :mod:`helpers.digests` — file and tree digests, to assert that files stayed byte-identical;
* :mod:`helpers.spider2`, :mod:`helpers.dabstep`, :mod:`helpers.kramabench`, :mod:`helpers.dacode` — tiny
  folders of those benchmarks in their official layouts (shared by tests/bench and tests/env).

Import as ``from helpers.procs import …``: ``tests/`` is on ``sys.path`` because pytest's default
``prepend`` import mode puts the folder of the root ``tests/conftest.py`` there, both in a full
``python3 -m pytest`` run from the repository root and when a single test file is run.
"""
