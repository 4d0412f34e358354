"""Building the Litestar app without the plugin Ash does not use.

Litestar registers its pydantic plugin whenever pydantic can be imported, and importing it costs
about 150 ms of cold start (a third of Ash's). Ash's handlers use msgspec structs only; pydantic
is installed solely because the LLM SDKs depend on it, and they import it later, lazily. So while
the app object is built, pydantic is marked unimportable: Litestar then skips the plugin exactly
as it does on an installation without pydantic. The mark is removed straight after.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_pydantic_plugin() -> Iterator[None]:
    """Build the app inside this block; pydantic stays importable for everything else."""
    if "pydantic" in sys.modules:  # already loaded by someone: nothing to save
        yield
        return
    sys.modules["pydantic"] = None  # type: ignore[assignment]  # makes `import pydantic` raise ImportError
    try:
        yield
    finally:
        del sys.modules["pydantic"]
