"""``python -m datadojo``: the ``datadojo`` command, ended without the interpreter's teardown
(:func:`datadojo.cli.app.exit_now`: 0.4-0.9 s of every command)."""

from datadojo.cli.app import exit_now, main

try:
    main()
except SystemExit as exc:
    exit_now(exc)
    raise
exit_now(SystemExit(0))
