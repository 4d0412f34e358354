"""A model's first streamed answer, and its first error, cost the event loop nothing.

The SDKs build parts of themselves at first use: Anthropic the pydantic schemas of about a
hundred error-detail models at its first error (a 529, a 500), 55 ms idle and over 100 ms on a
busy machine; both SDKs the schema of the stream's event union at their first stream, 80 to
110 ms. On the event loop, where the soak (tests/faults/test_soak.py) caught them as /healthz
stalls at a server's first turn and first 529. Each provider's warm-up (on the server's warm-up
thread) now makes an error and streams a canned answer through a client that never leaves the
process. Whether a schema is built does not depend on the machine, so that is what is checked, in
a fresh interpreter (another test may have built them already in this one).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.paths import FIXTURES, REPO

CHILD = """
import json, sys
import httpx2, pydantic, pydantic.type_adapter
from lib.llm.base import rehearse

name = sys.argv[1]
if name == "anthropic":
    import anthropic
    from lib.llm.anthropic_provider import REHEARSAL, AnthropicProvider as Provider
else:
    import openai as anthropic
    from lib.llm.openai_provider import REHEARSAL, OpenAIProvider as Provider

Provider("sk-test").warm()
built = []
rebuild = pydantic.BaseModel.model_rebuild.__func__
pydantic.BaseModel.model_rebuild = classmethod(lambda cls, *a, **k: built.append(cls.__name__) or rebuild(cls, *a, **k))
TA = pydantic.type_adapter.TypeAdapter
adapter = TA.__init__
TA.__init__ = lambda self, *a, **k: built.append(str(a[0])[:60]) or adapter(self, *a, **k)

request = httpx2.Request("POST", "https://api.example.invalid/v1/messages")
anthropic.APIStatusError("overloaded", response=httpx2.Response(529, request=request), body=json.loads(sys.argv[2]))
rehearse(lambda http: Provider("sk-test", "http://stub.invalid", http_client=http), REHEARSAL)
print(json.dumps(built))
"""


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_first_stream_and_the_first_error_build_nothing_after_the_warm_up(provider):
    recorded = json.loads((FIXTURES / "anthropic" / "error_529_overloaded_error.http.json").read_text())
    done = subprocess.run(
        [sys.executable, "-c", CHILD, provider, recorded["body_text"]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
