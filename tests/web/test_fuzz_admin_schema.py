"""The admin API fuzzed from its own OpenAPI schema (schemathesis) against a real `ash serve`.

With the right token: no 5xx, and every response conforms to the schema Litestar publishes
at /schema/openapi.json. The process must stay healthy afterwards.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.support.faults import AshServer, server_env, write_config

ADMIN = "admin-token-for-tests"
AUTH = {"authorization": f"Bearer {ADMIN}"}


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    home = tmp_path_factory.mktemp("schema") / "home"
    write_config(home)
    env = server_env(home, None)
    env.pop("TELEGRAM_BOT_TOKEN")  # no worker work: only the admin API is under test
    server = AshServer(home, env, name="schema").start()
    yield server
    assert server.http.get("/healthz").status_code == 200
    server.stop()


def test_admin_endpoints_conform_and_never_5xx(live_server):
    # schemathesis's pytest plugin does not load under this pytest; its strategies work directly.
    schema = schemathesis.openapi.from_url(f"http://127.0.0.1:{live_server.port}/schema/openapi.json")
    operations = [result.ok() for result in schema.include(path_regex="^/admin/").get_all_operations()]
    assert len(operations) >= 10

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        def check(case):
            case.call_and_validate(headers=AUTH, checks=[not_a_server_error, response_schema_conformance])

        check()
