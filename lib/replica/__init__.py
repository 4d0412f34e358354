"""Continuous replication of the database with Litestream, and restores from the replica."""
