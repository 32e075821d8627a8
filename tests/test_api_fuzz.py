"""/v1 fuzzed from its own OpenAPI description: thousands of requests, no 5xx, every error an OpenAI error object.

Schemathesis turns agents.openai_api.openapi's document (GENERATION_CAPS below bound its
lists) into Hypothesis strategies per operation: positive cases (valid by the schema: they run real turns with the
builtin model, in process, Celery eager) and negative ones (each breaks the
schema somewhere: wrong types, missing fields, odd strings, junk headers). Each
case goes through Django's test client with a valid API key (or, for some, the
key the case itself made up or none). Every answer must be under 500; a 4xx
must be JSON {"error": {"message", "type", "param", "code"}}; a JSON 2xx must
match the document's schema for it, and a stream must be JSON frames ending in
[DONE]. The dense embedding model is swapped for the bag-of-words stand-in.
"""

import json
import os

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core import NOT_SET

from agents.access.api_keys import create_api_key
from agents.openai_api.openapi import openapi_document
from tests.builders import make_user
from tests.test_permission_matrix import routes

DOCUMENT = openapi_document()
# TOOLHUB_FUZZ_SCALE=10 runs ten times the cases (a deeper search than the suite's 2,150).
SCALE = float(os.environ.get("TOOLHUB_FUZZ_SCALE") or 1)
POSITIVE, NEGATIVE = GenerationMode.POSITIVE, GenerationMode.NEGATIVE
# (path, method, mode, examples): positive chat cases may run turns (~0.1 s each), the rest answer in a few ms.
CAMPAIGNS = [
    ("/v1/chat/completions", "POST", POSITIVE, 150),
    ("/v1/chat/completions", "POST", NEGATIVE, 400),
    ("/v1/models", "GET", POSITIVE, 100),
    ("/v1/models", "GET", NEGATIVE, 300),
    ("/v1/models/{model_id}", "GET", POSITIVE, 300),
    ("/v1/models/{model_id}", "GET", NEGATIVE, 300),
    ("/v1/approvals/{approval_id}", "POST", POSITIVE, 300),
    ("/v1/approvals/{approval_id}", "POST", NEGATIVE, 300),
]
# Generation bounds (the served document's caps, 1000 messages and 128 tools, are tested in test_api_input): a
# few messages and tools per case, and objects closed to the fields toolhub reads, so the cases' time goes to
# requests rather than to generating arbitrary extra JSON (negative cases still add unknown fields).
GENERATION_CAPS = {"messages": 6, "tools": 3}


def for_generation(node):
    if isinstance(node, list):
        return [for_generation(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: for_generation(value) for key, value in node.items()}
    if node.get("type") == "object" and "properties" in node:
        node.setdefault("additionalProperties", False)
        for name, cap in GENERATION_CAPS.items():
            if "maxItems" in node["properties"].get(name, {}):
                node["properties"][name]["maxItems"] = cap
    return node


SCHEMA = schemathesis.openapi.from_dict({**DOCUMENT, "components": for_generation(DOCUMENT["components"])})
ERROR_FIELDS = {"message": str, "type": str, "param": (str, type(None)), "code": (str, type(None))}
DROPPED_HEADERS = {"content-type", "content-length", "host", "transfer-encoding"}


def send(client, case, key: str | None):
    headers = {name: value for name, value in (case.headers or {}).items() if name.lower() not in DROPPED_HEADERS}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    if case.body is NOT_SET:
        body = b""
    elif isinstance(case.body, bytes):  # a negative case's raw body
        body = case.body
    else:
        body = json.dumps(case.body).encode()
    return client.generic(case.method, case.formatted_path, body, content_type=case.media_type or "application/json",
                          headers=headers, query_params=case.query or {})  # fmt: skip


def documented(path: str, method: str, status: int) -> dict | None:
    """The JSON schema the document gives for this answer, with its components to resolve references in."""
    answer = DOCUMENT["paths"][path][method.lower()]["responses"].get(str(status), {})
    schema = answer.get("content", {}).get("application/json", {}).get("schema")
    return None if schema is None else {**schema, "components": DOCUMENT["components"]}


def assert_error_object(body) -> None:
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == set(ERROR_FIELDS), error
    for field, kinds in ERROR_FIELDS.items():
        assert isinstance(error[field], kinds), error


def check(case, response) -> None:
    status = response.status_code
    assert status < 500, f"{case.method} {case.formatted_path} -> {status}: {response.content[:500]!r}"
    if response.streaming:
        assert status == 200 and response["Content-Type"].startswith("text/event-stream")
        frames = [line.removeprefix("data: ") for line in b"".join(response).decode().split("\n\n") if line]
        assert frames[-1] == "[DONE]", frames[-3:]
        for frame in map(json.loads, frames[:-1]):
            if "error" in frame:
                assert_error_object(frame)
            else:
                assert frame["object"] == "chat.completion.chunk", frame
        return
    assert response["Content-Type"].startswith("application/json"), (status, response["Content-Type"])
    body = response.json()
    if status >= 400:
        assert_error_object(body)
    schema = documented(case.operation.path, case.method, status)
    assert schema is not None, f"{status} is not documented for {case.method} {case.operation.path}"
    jsonschema.validate(body, schema, cls=jsonschema.Draft202012Validator)


@pytest.fixture
def fuzzing(settings, counted_embedder):
    settings.TOOLHUB_RATE_LIMIT_PER_MINUTE = settings.TOOLHUB_USER_RATE_LIMIT_PER_MINUTE = 0
    return create_api_key(user=make_user("fuzzer", role="operator"), name="fuzz")[1]


@pytest.mark.django_db(transaction=True)  # turns run in a worker thread with its own connection
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators")
@pytest.mark.parametrize("path,method,mode,examples", CAMPAIGNS, ids=lambda v: getattr(v, "value", v))
def test_fuzzed_requests_get_no_5xx_and_openai_shaped_errors(client, fuzzing, path, method, mode, examples):
    operation = SCHEMA[path][method]
    # Mostly the valid key (so cases reach the checks past authentication), sometimes the case's own or none.
    keys = st.sampled_from([fuzzing] * 8 + [None, "th_000000000000_not-a-real-key"])
    ran = []

    slow_is_fine = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
                    HealthCheck.large_base_example]  # fmt: skip

    @hypothesis_settings(max_examples=int(examples * SCALE), database=None, suppress_health_check=slow_is_fine)
    @given(case=operation.as_strategy(generation_mode=mode), key=keys)
    def fuzz(case, key):
        ran.append(case)
        check(case, send(client, case, key))

    fuzz()
    print(f"{method} {path} {mode.value}: {len(ran)} cases")
    assert len(ran) >= examples * SCALE // 2  # the campaign ran (Hypothesis stops early only on a tiny input space)


@pytest.mark.django_db
def test_the_description_is_served_without_a_key_and_its_schemas_are_valid(client):
    response = client.get("/v1/openapi.json")
    assert response.status_code == 200 and response.json() == json.loads(json.dumps(DOCUMENT))
    assert DOCUMENT["openapi"] == "3.1.0"
    for schema in DOCUMENT["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    documented_paths = {path.replace("{model_id}", "<str:model_id>").replace("{approval_id}", "<int:approval_id>")
                        for path in DOCUMENT["paths"]}  # fmt: skip
    assert documented_paths == {"/" + route for route in routes() if route.startswith("v1/")}
