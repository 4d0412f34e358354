"""Tools the model may call: a small interface (`base.py`) and a registry (`registry.py`)."""
