"""toolhub.model_rows: a plain statement's row comes back as the instance a queryset gives."""

import pytest
from django.db import connection
from django.utils import timezone

from agents.access.api_keys import create_api_key
from agents.models import ApiKey
from tests.support.builders import make_user
from toolhub.model_rows import fetch_one

pytestmark = pytest.mark.django_db


def fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def test_a_row_is_the_instance_a_queryset_gives_with_every_value_converted():
    api_key, _ = create_api_key(user=make_user(), name="k", scopes=["mcp", "chat"])
    ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=timezone.now())
    by_id = f"{connection.ops.quote_name('id')} = %s"

    fetched = fetch_one(ApiKey, by_id, [api_key.pk])

    assert fields(fetched) == fields(ApiKey.objects.get(pk=api_key.pk))
    assert fetched.scopes == ["chat", "mcp"] and timezone.is_aware(fetched.last_used_at)  # JSON, an aware datetime
    assert fetched._state.db == "default" and not fetched._state.adding  # saved, not new: .save() updates it
    assert fetch_one(ApiKey, by_id, [api_key.pk + 1]) is None
