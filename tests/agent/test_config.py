"""Agent configuration: flags > environment > file > defaults, with clear errors."""

from __future__ import annotations

import pytest

from fleet_agent.config import ConfigError, load_config

REQUIRED = {"api": "http://x", "site": "lon-1", "satellite": "sat-a", "client_id": "id", "client_secret": "s"}


def test_flags_override_environment_which_overrides_the_file(tmp_path):
    file = tmp_path / "agent.toml"
    file.write_text('api = "http://file"\nsite = "from-file"\nsatellite = "sat-f"\nseed = 1\nconcurrency = 2\n')
    env = {
        "FLEET_AGENT_SITE": "from-env",
        "FLEET_AGENT_SEED": "5",
        "FLEET_AGENT_CLIENT_ID": "id",
        "FLEET_AGENT_CLIENT_SECRET": "s",
    }
    config = load_config({"seed": 9, "satellite": None}, environ=env, file=str(file))
    assert (config.api, config.site, config.satellite, config.seed, config.concurrency) == (
        "http://file",
        "from-env",
        "sat-f",
        9,
        2,
    )


def test_yaml_files_carry_command_templates(tmp_path):
    file = tmp_path / "agent.yaml"
    file.write_text(
        "executor: command\ncommands:\n  dcgm-diag: {template: 'ssh {hostname} dcgmi diag -r 3 -j', "
        "parser: dcgm-diag-json}\n"
    )
    config = load_config(REQUIRED, environ={}, file=str(file))
    assert config.commands["dcgm-diag"]["parser"] == "dcgm-diag-json"


@pytest.mark.parametrize(
    ("flags", "environ", "message"),
    [
        ({}, {}, "missing configuration: --api / FLEET_AGENT_API"),
        (REQUIRED | {"executor": "magic"}, {}, "executor: 'magic'"),
        (REQUIRED | {"executor": "command"}, {}, "commands:"),
        (REQUIRED, {"FLEET_AGENT_CONCURRENCY": "many"}, "concurrency: 'many' is not a valid int"),
        (REQUIRED | {"log_format": "xml"}, {}, "log_format"),
    ],
)
def test_bad_configuration_names_the_key(flags, environ, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config(flags, environ=environ)


def test_an_unknown_key_in_the_file_is_refused(tmp_path):
    file = tmp_path / "agent.toml"
    file.write_text('sattelite = "typo"\n')
    with pytest.raises(ConfigError, match="unknown key 'sattelite'"):
        load_config(REQUIRED, environ={}, file=str(file))
