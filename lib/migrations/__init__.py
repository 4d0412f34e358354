"""Numbered migration steps; `migrate.py` applies them in order. An applied step is never edited."""
