"""A model's first error answer costs the event loop nothing.

The Anthropic SDK builds the pydantic schemas of about a hundred error-detail models the first
time it makes an error (a 529, a 500, a 429): 55 ms on an idle machine, over 100 ms on a busy
one, on the event loop, where the soak (tests/faults/test_soak.py) saw /healthz stall at a
server's first 529. The provider's warm-up (run on the warm-up thread) now makes one first.
Whether a schema is built does not depend on the machine, so that is what is checked, in a fresh
interpreter (another test may have built them already in this one).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import FIXTURES, REPO

CHILD = """
import json, sys
import anthropic, httpx2, pydantic
from lib.llm.anthropic_provider import AnthropicProvider

AnthropicProvider("sk-ant-test").warm()
built = []
rebuild = pydantic.BaseModel.model_rebuild.__func__
pydantic.BaseModel.model_rebuild = classmethod(lambda cls, *a, **k: built.append(cls.__name__) or rebuild(cls, *a, **k))
request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
anthropic.APIStatusError("overloaded", response=httpx2.Response(529, request=request), body=json.loads(sys.argv[1]))
print(json.dumps(built))
"""


def test_the_first_529_builds_no_schema_after_the_warm_up():
    recorded = json.loads((FIXTURES / "anthropic" / "error_529_overloaded_error.http.json").read_text())
    done = subprocess.run(
        [sys.executable, "-c", CHILD, recorded["body_text"]], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
