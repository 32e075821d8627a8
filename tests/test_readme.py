"""The docs document every environment variable the settings read (docs/configuration.md)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_environment_variable_is_in_the_configuration_table():
    settings_source = (ROOT / "toolhub" / "settings.py").read_text()
    read = set(re.findall(r'env_(?:bool|int|float|list)\("([A-Z_]+)"', settings_source))
    read |= set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', settings_source))
    table = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"`([A-Z][A-Z_]+)`", table))
    assert read - documented == set()
