"""What importing the app loads: nothing slow that a webhook does not need (cold start < 1 s)."""

import subprocess
import sys

CHECK = """
import sys, app
slow = [m for m in ("pydantic", "litestar.plugins.pydantic", "anthropic", "openai", "numpy", "onnxruntime", "docker")
        if m in sys.modules]
assert not slow, slow
import pydantic  # still importable for the LLM SDKs that need it
print("ok", len(app.app.routes))
"""


def test_importing_the_app_skips_slow_modules_and_leaves_pydantic_importable():
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")
