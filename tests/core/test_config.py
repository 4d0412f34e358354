"""Configuration: defaults, the file, the environment, and errors that name the key."""

from pathlib import Path

import pytest

from lib.config import load_settings, parse_config
from lib.errors import ConfigError
from tests.support.paths import REPO


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_defaults_without_a_file(ash_home):
    settings = load_settings()
    assert not settings.config_file_found
    assert settings.database_path == ash_home / "ash.db"
    assert settings.config.server.port == 8080
    assert settings.config.default_llm.provider == "anthropic"
    assert settings.config.fallback_llm is None  # gpt-4o stands in only with OPENAI_API_KEY (tests/llm)
    assert settings.config.sandbox.enabled == "auto"
    assert settings.config.embeddings.provider == "local"
    assert settings.config.sandbox.network_disabled is True
    assert settings.workspace.joinpath("SOUL.md").is_file()


def test_ash_home_defaults_to_the_checkouts_data_folder_wherever_the_shell_is(monkeypatch, tmp_path):
    # It was ./data of the working directory: `ash users show` run from another directory
    # silently made a blank setup there.
    monkeypatch.delenv("ASH_HOME")
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.database_path == REPO / "data" / "ash.db" and settings.home_from == "default"
    monkeypatch.setenv("ASH_HOME", "elsewhere")  # a relative ASH_HOME is the user's own choice
    assert load_settings().home == tmp_path / "elsewhere"


def test_example_config_is_valid_and_documents_every_section():
    text = (REPO / "config.example.toml").read_text()
    config = parse_config(text, Path("config.example.toml"))
    for section in (
        "server",
        "telegram",
        "default_llm",
        "fallback_llm",
        "memory",
        "embeddings",
        "sandbox",
        "scheduler",
        "transcription",
        "documents",
        "web_fetch",
    ):
        assert f"[{section}]" in text
    assert "[brave_search]" in text
    assert "# [models.fast]" in text  # model presets: commented examples
    assert "# [mcp.servers.files]" in text and "${TRACKER_TOKEN}" in text  # MCP servers: commented examples
    assert config.memory.recency_window == 10


def test_file_values_and_environment_overrides(ash_home, monkeypatch):
    write_config(
        ash_home,
        'owner = 42\ntimezone = "Europe/Berlin"\n[server]\nport = 9000\n[memory]\ndatabase_path = "$ASH_HOME/x.db"\n',
    )
    monkeypatch.setenv("PORT", "9100")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi")
    settings = load_settings()
    assert settings.config.owner == 42
    assert settings.config.server.port == 9100
    assert settings.database_path == ash_home / "x.db"
    assert settings.bot_id == 123456
    assert "ABCDEF" not in repr(settings.secrets)


def test_user_prices_extend_the_defaults(ash_home):
    write_config(ash_home, '[prices."my-model"]\ninput = 1.0\noutput = 2.0\n')
    prices = load_settings().config.prices
    assert prices["my-model"].output == 2.0
    assert "claude-sonnet-4-6" in prices


# A valid preset, then a second one that the case adds keys to: the error names the failing one.
PRESET = (
    '[models.ok]\nprovider = "openai"\nmodel = "gpt-4o"\n[models.fast]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[server]\nport = 'eighty'\n", "`server.port`: expected `int`, got `str`"),
        ("[server]\nport = 70000\n", "`server.port`: expected a number from 1 to 65535, got 70000"),
        ('timezone = "Mars/Olympus"\n', "`timezone`: expected an IANA time zone name"),
        ("[memroy]\nrecency_window = 3\n", "unknown key `memroy`"),
        ("[sandbox]\ntimout = 3\n", "unknown key `sandbox.timout`"),
        ('[default_llm]\nprovider = "gemini"\n', "`default_llm.provider`: expected one of"),
        ("[memory]\nextraction_confidence_threshold = 2.0\n", "from 0 to 1"),
        ("[default_llm]\ntemperature = 5\n", "`default_llm.temperature`: expected a number from 0 to 2, got 5"),
        ("[default_llm]\ntemperature = 1.5\n", "`default_llm.temperature`: Anthropic accepts a number from 0 to 1"),
        ("[fallback_llm]\nmax_tokens = -1\n", "`fallback_llm.max_tokens`: expected a number of at least 1, got -1"),
        ("[telegram]\nstream_edit_interval = -1\n", "`telegram.stream_edit_interval`: expected a number above 0"),
        ("[memory]\nmax_entries = 0\n", "`memory.max_entries`: expected a number of at least 1, got 0"),
        ("[brave_search]\ncount = 50\n", "`brave_search.count`: expected a number from 1 to 20, got 50"),
        ('[sandbox]\nenabled = "yes"\n', "`sandbox.enabled`: expected one of \"auto\", true, false, got 'yes'"),
        (PRESET + "tempo = 0.1\n", "unknown key `models.fast.tempo`"),
        (PRESET + "temperature = 3\n", "`models.fast.temperature`: expected a number from 0 to 2, got 3"),
        (PRESET + "max_tokens = 0\n", "`models.fast.max_tokens`: expected a number of at least 1, got 0"),
        ('[models.fast]\nprovider = "gemini"\nmodel = "m"\n', "`models.fast.provider`: expected one of"),
        ('[models.fast]\nprovider = "openai"\n', "`models.fast`: object missing required field `model`"),
        (
            '[models.fast]\nprovider = "anthropic"\nmodel = "m"\ntemperature = 1.5\n',
            "`models.fast.temperature`: Anthropic",
        ),
        ('[models.Fast]\nprovider = "openai"\nmodel = "m"\n', "`models.Fast`: a preset name is 1 to 32 lower-case"),
        ('[models.default]\nprovider = "openai"\nmodel = "m"\n', '`models.default`: "default" means [default_llm]'),
        ('[prices."gpt-4.1"]\ninptu = 1.0\n', 'unknown key `prices."gpt-4.1".inptu`'),
        ("[prices.mine]\ninput = -1\n", "`prices.mine.input`: expected a number of at least 0, got -1"),
        ("owner = 1\n[server]\nport = 8080,\n", "line 3 is not valid TOML (expected newline or end of document"),
        ("owner = \n", "line 1 is not valid TOML (invalid value, column 9): owner ="),
    ],
)
def test_invalid_values_name_the_key_and_what_is_expected(ash_home, text, expected):
    write_config(ash_home, text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert expected in str(caught.value)
    assert str(ash_home / "config.toml") in str(caught.value)


def test_values_in_range_are_accepted(ash_home):
    write_config(
        ash_home,
        '[default_llm]\nprovider = "openai"\ntemperature = 2\nmax_tokens = 1\n'
        "[telegram]\nstream_edit_interval = 0.2\n[sandbox]\nenabled = false\n",
    )
    config = load_settings().config
    assert (config.default_llm.temperature, config.default_llm.max_tokens) == (2.0, 1)
    assert config.telegram.stream_edit_interval == 0.2 and config.sandbox.enabled is False


def test_model_presets_take_the_keys_of_default_llm_with_its_defaults(ash_home):
    write_config(
        ash_home,
        '[models.mini]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
        '[models."gpt-4.1"]\nprovider = "openai"\nmodel = "gpt-4.1"\ntemperature = 1.5\nmax_tokens = 8192\n',
    )
    models = load_settings().config.models
    assert list(models) == ["mini", "gpt-4.1"]
    assert (models["mini"].provider, models["mini"].model) == ("openai", "gpt-4o-mini")
    assert (models["mini"].temperature, models["mini"].max_tokens) == (0.7, 4096)
    assert (models["gpt-4.1"].temperature, models["gpt-4.1"].max_tokens) == (1.5, 8192)


def test_bad_port_in_environment(monkeypatch, ash_home):
    monkeypatch.setenv("PORT", "http")
    with pytest.raises(ConfigError, match="PORT: expected a port number"):
        load_settings()


def test_missing_explicit_config_file_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ASH_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings()


def test_endpoint_overrides_must_be_origins(monkeypatch, ash_home):
    monkeypatch.setenv("TELEGRAM_API_BASE", "http://127.0.0.1:9999/")
    assert load_settings().secrets.telegram_api_base == "http://127.0.0.1:9999"
    # Ollama documents its OpenAI endpoint with /v1; the clients add /v1 themselves.
    for given in ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434"):
        monkeypatch.setenv("OPENAI_BASE_URL", given)
        assert load_settings().secrets.openai_base_url == "http://127.0.0.1:11434"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://proxy.example/anthropic/v1")
    assert load_settings().secrets.anthropic_base_url == "https://proxy.example/anthropic"
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:11434")
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        load_settings()


def test_mcp_servers_need_one_way_to_start_and_a_name_that_prefixes_tools(ash_home):
    stdio = '[mcp.servers.files]\ncommand = "npx"\nargs = ["-y", "server"]\nenv = { KEY = "${FILES_KEY}" }\n'
    config = parse_config(stdio, Path("c.toml"))
    assert config.mcp.servers["files"].env == {"KEY": "${FILES_KEY}"}  # resolved when the server starts
    with pytest.raises(ConfigError, match="either `command`"):
        parse_config('[mcp.servers.both]\ncommand = "x"\nurl = "http://h/mcp"\n', Path("c.toml"))
    with pytest.raises(ConfigError, match="without '__'"):
        parse_config('[mcp.servers.a__b]\ncommand = "x"\n', Path("c.toml"))
