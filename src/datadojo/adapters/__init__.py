"""DataDojo's environment loaded by other frameworks (issue 37, item 4; docs/environment.md).

* :mod:`datadojo.adapters.verifiers` — a verifiers environment: ``vf-eval datadojo -a '{"tasks": ...}'``;
* :mod:`datadojo.adapters.openenv` — an OpenEnv server: ``datadojo env serve TASKS``;
* :mod:`datadojo.adapters.source` — what both serve: the tasks, ``datadojo eval``'s settings for them and
  the registry's reward.

The frameworks are optional dependencies (``pip install 'datadojo[verifiers]'`` / ``'datadojo[openenv]'``),
imported only when an adapter is used.
"""
