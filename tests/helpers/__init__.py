"""Helpers shared by the test suites (not tests themselves).

* :mod:`helpers.procs` — processes: live descendants (the sandbox worker's own ``/proc`` reading), processes
  of a uid or with a command line, waiting for processes to go;
* :mod:`helpers.digests` — file and tree digests, to assert that files stayed byte-identical;
* :mod:`helpers.spider2` — a tiny Spider 2.0-lite folder in the official layout.

Import as ``from helpers.procs import …``: ``tests/`` is on ``sys.path`` because pytest's default
``prepend`` import mode puts the folder of the root ``tests/conftest.py`` there, both in a full
``python3 -m pytest`` run from the repository root and when a single test file is run.
"""
