"""DataDojo's environment inside other frameworks' own interfaces (issue 37, item 4; docs/environment.md).

* :mod:`datadojo.integrations.verifiers` — a verifiers environment: ``vf-eval datadojo -a '{"tasks": ...}'``;
* :mod:`datadojo.integrations.openenv` — an OpenEnv server: ``datadojo env serve TASKS``;
* :mod:`datadojo.integrations.inspect` — inspect_ai tasks (``inspect eval datadojo/tasks``) and the
  ``datadojo`` inspect sandbox environment;
* :mod:`datadojo.integrations.harbor` — Harbor task folders (``datadojo export harbor``) and their verifier;
* :mod:`datadojo.integrations.source` — what the verifiers and OpenEnv adapters serve: the tasks,
  ``datadojo eval``'s settings for them and the registry's reward.

Each adapts :mod:`datadojo.env` (the episode, its sandbox) and the reward registry
(:mod:`datadojo.reward.registry`) to one framework, and chooses or computes no reward of its own. The
framework is an optional extra: importing a module here never imports it; using it without it installed
raises a one-line error naming the extra.
"""
