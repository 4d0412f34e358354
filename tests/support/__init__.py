"""Fixtures and helpers shared by the tests of every part (one home for each)."""
