"""Command-line interface: thin typer commands over the library API (one module per command group)."""
