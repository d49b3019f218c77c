"""EnvLunch (arXiv 2610.33817): verifiable warm-up tasks made from databases and tables, no annotation.

A random executable trajectory is composed from an action pool and executed (§3, Eq. 1); the task is the
environment and the final observation o* (Eq. 2); a submission is rewarded by Eq. (4) for reproducing the
hidden trajectory's results in K counterfactual copies of the environment.

Modules, in pipeline order:

* :mod:`.environment` — load a SQLite database or a table file (tables, keys, rows);
* :mod:`.keys` — key / identifier / measure / … detection;
* :mod:`.perturb` — counterfactual copies (30% deletion with FK cascade, measure rescaling);
* :mod:`.sql_actions`, :mod:`.pandas_actions` — the action pools (15 SQL operators; pandas chains);
* :mod:`.synthesis` — online synthesis and the §3 filter; :mod:`.build` — task sets, in parallel;
* :mod:`.tasks` — :class:`datadojo.types.Task` records and the files beside them;
* canonical results, running submissions and Eq. (4) live in :mod:`datadojo.reward` (``canon``,
  ``programs``, ``envlunch``), below synthesis, so every consumer's reward comes from the registry;
* :mod:`.solver` — reference query-by-output solver; :mod:`.audit` — constant-printing audit;
* :mod:`.solver_check` — the solver's share of a build, and why it fails on the rest;
* :mod:`.probe` — the §6 uncertainty-reduction probe.

See ``docs/envlunch.md``.
"""
