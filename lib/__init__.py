"""Ash: a self-hosted personal assistant for Telegram."""
