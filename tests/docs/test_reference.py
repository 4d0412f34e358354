"""The reference pages are the code's own account of itself: docs/gen/reference.py writes them
from the settings schema, the click group, the chat command registry and the OpenAPI schema. A
committed page that differs from what it writes, or a key, command, flag or route without a
description, fails here."""

from __future__ import annotations

import importlib.util
import sys
from typing import Annotated

import click
import msgspec
import pytest

from lib.config import Config
from tests.support.paths import REPO

# The generator is a script beside the pages it writes (docs/gen/), not a package: load it by path.
_spec = importlib.util.spec_from_file_location("docs_reference", REPO / "docs" / "gen" / "reference.py")
reference = sys.modules.setdefault("docs_reference", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(reference)


@pytest.mark.parametrize("name", list(reference.PAGES))
def test_the_committed_reference_page_is_what_the_generator_writes(name):
    committed = (reference.OUT / name).read_text(encoding="utf-8")
    assert committed == reference.PAGES[name](), (
        f"docs/reference/{name} is out of date: run .venv/bin/python docs/gen/reference.py"
    )


def test_every_config_key_and_table_has_a_description():
    tables = list(reference.config_tables(Config))
    assert {"server", "telegram", "memory", "sandbox", "models.NAME", "mcp.servers.NAME"} <= {t.name for t in tables}
    assert not [t.name for t in tables if t.name and not t.description.strip()]
    assert not [f"{t.name}.{k.key}" for t in tables for k in t.keys if not k.description.strip()]


def test_a_key_without_a_description_is_caught_and_ranges_and_choices_are_shown():
    class Toy(msgspec.Struct, kw_only=True):
        size: Annotated[int, msgspec.Meta(ge=1, le=9), msgspec.Meta(description="How big.")] = 3
        mode: Annotated[str, msgspec.Meta(description="How.")] = "a"
        bare: bool = True

    (table,) = reference.config_tables(Toy)
    keys = {k.key: k for k in table.keys}
    assert (keys["size"].default, keys["size"].allowed, keys["size"].description) == (
        "`3`",
        "integer, 1 to 9",
        "How big.",
    )
    assert [k.key for k in table.keys if not k.description] == ["bare"]


def test_every_ash_command_and_flag_has_help():
    commands = reference.cli_commands()
    paths = {c.path for c in commands}
    assert {"ash", "ash serve", "ash memory list", "ash users allow", "ash webhook set"} <= paths
    assert not [c.path for c in commands if not c.help.strip()]
    assert not [f"{c.path} {flags}" for c in commands for flags, _, text in c.options if not text.strip()]


def test_a_flag_without_help_is_caught():
    @click.command()
    @click.option("--limit", type=click.IntRange(1, 100), default=10)
    def toy(limit: int) -> None:
        """A toy."""

    (command,) = reference.cli_commands(toy)
    assert command.options == [("`--limit` `INTEGER RANGE`", "integer 1 to 100; default `10`", "")]


def test_every_chat_command_has_a_description():
    from lib.conversation.commands import REGISTRY

    page = reference.chat_page()
    for command in REGISTRY:
        assert command.description.strip(), f"/{command.name} has no description"
        assert f"`/{command.name}`" in page


def test_every_http_route_has_a_description():
    operations = reference.http_operations()
    assert {("GET", "/admin/memories"), ("POST", "/admin/reload"), ("GET", "/healthz")} <= {
        (op.method, op.path) for op in operations
    }
    assert not [f"{op.method} {op.path}" for op in operations if not op.description.strip()]
    # A path parameter is named in the path the description is about; a query parameter needs its own.
    undescribed = [
        f"{op.method} {op.path} ?{p['name']}"
        for op in operations
        for p in op.parameters
        if p["in"] == "query" and not p.get("description")
    ]
    assert not undescribed
    assert not [path for _, path, doc in reference.unlisted_routes() if not doc]


def test_a_route_without_a_description_is_caught():
    schema = {"paths": {"/x": {"get": {"responses": {"200": {}}}}}}
    assert [op.description for op in reference.http_operations(schema)] == [""]
