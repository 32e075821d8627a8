"""MCP server secrets at rest: never plain in the database, readable after a key rotation, a clear error otherwise."""

import json

import pytest
from django.db import connection

from catalog.models import McpServer
from catalog.models.secrets import SecretUnreadable

pytestmark = pytest.mark.django_db
TOKEN = "sk-live-very-secret-token"


def stored(server) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT env, headers FROM catalog_mcpserver WHERE id = %s", [server.pk])
        return cursor.fetchone()


def make_server(**fields) -> McpServer:
    values = {"name": "crm", "transport": "http", "url": "https://crm.example/mcp",
              "headers": {"Authorization": f"Bearer {TOKEN}"}, "env": {"API_TOKEN": TOKEN}} | fields  # fmt: skip
    return McpServer.objects.create(**values)


def test_env_and_headers_are_encrypted_in_the_database_and_plain_in_python():
    server = make_server()
    env, headers = stored(server)
    assert TOKEN not in env and TOKEN not in headers
    assert env.startswith("fernet:") and headers.startswith("fernet:")
    server = McpServer.objects.get(pk=server.pk)
    assert server.env == {"API_TOKEN": TOKEN}
    assert server.headers == {"Authorization": f"Bearer {TOKEN}"}


def test_a_rotated_secret_key_still_reads_through_the_fallbacks_and_the_next_save_uses_the_new_key(settings):
    server = make_server()
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key-" + "x" * 40, [old_key]
    assert McpServer.objects.get(pk=server.pk).env == {"API_TOKEN": TOKEN}
    McpServer.objects.get(pk=server.pk).save()
    settings.SECRET_KEY_FALLBACKS = []
    assert McpServer.objects.get(pk=server.pk).env == {"API_TOKEN": TOKEN}


def test_a_key_that_opens_nothing_is_a_clear_error_not_an_empty_secret(settings):
    server = make_server()
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "an-unrelated-secret-key-" + "y" * 40, []
    with pytest.raises(SecretUnreadable, match="SECRET_KEY_FALLBACKS"):
        McpServer.objects.get(pk=server.pk)


def test_a_row_written_before_encryption_reads_and_is_encrypted_when_saved():
    server = make_server(env={}, headers={})
    with connection.cursor() as cursor:
        plain = json.dumps({"API_TOKEN": TOKEN})
        cursor.execute("UPDATE catalog_mcpserver SET env = %s WHERE id = %s", [plain, server.pk])
    server = McpServer.objects.get(pk=server.pk)
    assert server.env == {"API_TOKEN": TOKEN}
    server.save()
    assert TOKEN not in stored(server)[0]
