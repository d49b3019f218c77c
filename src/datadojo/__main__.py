"""``python -m datadojo``: the ``datadojo`` command."""

from datadojo.cli.app import main

main()
