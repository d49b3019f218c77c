"""DataDojo's environment inside other frameworks' own interfaces (inspect_ai, Harbor).

Each sub-package adapts :mod:`datadojo.env` (the episode, its sandbox) and the reward registry
(:mod:`datadojo.reward.registry`) to one framework, and chooses or computes no reward of its own. The
framework is an optional extra: importing a sub-package never imports it; using it without it installed
raises :class:`~datadojo.errors.MissingExtraError` naming the extra. See docs/environment.md.
"""
