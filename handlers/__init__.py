"""HTTP handlers: one file per endpoint, each a thin function over `lib/`."""
