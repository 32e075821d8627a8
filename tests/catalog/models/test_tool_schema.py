"""A tool whose schema is not a JSON object schema is rejected everywhere, nothing half-saved."""

import pytest
from django.core.exceptions import ValidationError

from catalog.models import Tool, ToolPolicy
from catalog.policies.importers import ToolImportError, import_tools
from tests.support.builders import OBJECT_SCHEMA, make_user

BAD_SCHEMAS = [
    pytest.param(["q"], id="a list"),
    pytest.param("object", id="a string"),
    pytest.param({"properties": {"q": {"type": "string"}}}, id="no type"),
    pytest.param({"type": "array", "items": {"type": "string"}}, id="array type"),
    pytest.param({"type": "object", "properties": ["q"]}, id="properties not a mapping"),
    pytest.param({"type": "object", "properties": {"q": {"type": "strin"}}}, id="unknown property type"),
    pytest.param({"type": "object", "properties": {}, "required": ["q"]}, id="required but undefined"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("schema", BAD_SCHEMAS)
def test_model_clean_and_save_reject_a_non_object_schema(schema):
    tool = Tool(name="bad_tool", description="d", input_schema=schema)
    with pytest.raises(ValidationError) as error:
        tool.full_clean()
    assert "input_schema" in error.value.message_dict
    with pytest.raises(ValidationError):
        tool.save()
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_validation_message_names_the_problem():
    tool = Tool(name="bad_tool", description="d", input_schema={"type": "array"})
    with pytest.raises(ValidationError) as error:
        tool.full_clean()
    assert error.value.message_dict["input_schema"] == [
        'The input schema must have "type": "object" at the top level (got \'array\').'
    ]


@pytest.mark.django_db
def test_bad_tool_name_is_rejected():
    with pytest.raises(ValidationError):
        Tool(name="has spaces", description="d", input_schema=OBJECT_SCHEMA).save()


@pytest.mark.django_db
def test_import_is_all_or_nothing_and_names_every_error():
    definitions = [
        {"name": "good_one", "description": "fine", "input_schema": OBJECT_SCHEMA},
        {"name": "bad_one", "description": "broken", "input_schema": {"type": "string"}},
        {"name": "bad_two", "description": "broken", "input_schema": None},
    ]
    with pytest.raises(ToolImportError) as error:
        import_tools(definitions)
    assert set(error.value.errors) == {"bad_one", "bad_two"}
    assert "nothing saved" in str(error.value)
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_import_rejects_a_policy_with_unknown_domain_and_saves_nothing():
    definitions = [
        {
            "name": "good_one",
            "description": "fine",
            "input_schema": OBJECT_SCHEMA,
            "policy": {"domains": ["nowhere"], "operation": "read", "status": "active"},
        }
    ]
    with pytest.raises(ToolImportError) as error:
        import_tools(definitions)
    assert "unknown domains nowhere" in str(error.value)
    assert not Tool.objects.exists() and not ToolPolicy.objects.exists()


@pytest.mark.django_db
def test_import_updates_existing_tools_by_name():
    import_tools([{"name": "thing", "description": "v1", "input_schema": OBJECT_SCHEMA}])
    result = import_tools([{"name": "thing", "description": "v2", "input_schema": OBJECT_SCHEMA}])
    assert result.updated == ["thing"]
    assert Tool.objects.get(name="thing").description == "v2"
    again = import_tools([{"name": "thing", "description": "v2", "input_schema": OBJECT_SCHEMA}])
    assert again.unchanged == ["thing"]


@pytest.mark.django_db
def test_admin_shows_the_schema_error_next_to_the_field(client):
    admin = make_user("root", role="admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    response = client.post(
        "/admin/catalog/tool/add/",
        {
            "name": "bad_tool",
            "description": "d",
            "input_schema": '{"type": "array"}',
            "source": "builtin",
            "enabled": "on",
            "policy-TOTAL_FORMS": "0",
            "policy-INITIAL_FORMS": "0",
            "policy-MIN_NUM_FORMS": "0",
            "policy-MAX_NUM_FORMS": "1",
        },
    )
    assert response.status_code == 200
    assert "must have &quot;type&quot;: &quot;object&quot;" in response.content.decode()
    assert not Tool.objects.exists()
