"""The `ash` CLI: `cli.py` is the click group; one module per command group, imported only when
that command runs (the COMMANDS table in cli.py names them)."""
