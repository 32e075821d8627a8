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

The OAuth endpoints (registration, token, revocation, the authorize page) and the dashboard's forms (login,
policy and knowledge edits) are fuzzed with Hypothesis below: hostile strings (NUL bytes, lone surrogates in
JSON, very long values), wrong types (repeated form fields, any JSON where an object is expected), unknown
fields. Every answer must be under 500; the OAuth JSON endpoints answer a 400 with an OAuth error object. The
database refuses a NUL byte in a query's parameters there as PostgreSQL does (SQLite would store it), so a NUL
that reaches the database fails here too.
"""

import base64
import json
import os
from urllib.parse import urlencode

import jsonschema
import pytest
import schemathesis
from django.db import DataError, connection
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core import NOT_SET

from agents.access.api_keys import create_api_key
from agents.openai_api.openapi import openapi_document
from catalog.models import Domain, KnowledgeSnippet
from tests.support.builders import make_policy, make_tool, make_user
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


# --- OAuth and the dashboard's forms --------------------------------------------------------------------------

NUL = "\x00"
REDIRECT = "http://127.0.0.1:1/cb"
# Strings as a hostile client sends them: with a NUL byte inside, short text of any character, plausible values,
# and values far longer than any field takes (built by repetition, cheap to generate).
hostile_text = st.one_of(
    st.builds(lambda before, after: f"{before}{NUL}{after}", st.text(max_size=5), st.text(max_size=5)),
    st.text(max_size=20),
    st.sampled_from(["%00", "authorization_code", "refresh_token", "code", "S256", "plain", "mcp", REDIRECT, "-1",
                     "99999999999999999999", "https://[::1/cb"]),
    st.builds(lambda char, size: char * size, st.sampled_from(["a", "é", NUL, "7"]), st.integers(129, 20_000)),
)  # fmt: skip
# Form values: one string, or a field repeated (Django takes the last; views that read lists get them all).
form_value = st.one_of(hostile_text, st.lists(hostile_text, min_size=2, max_size=3))
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text | st.just("\ud800"),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(hostile_text, children, max_size=3),
    max_leaves=8,
)


def mangled(valid: dict, values=form_value):
    """What a well-behaved client sends (`valid`) with one field, or an unknown one, set to a hostile value, or
    one left out; now and then a form of hostile values only. The first reaches the code past the form's checks."""
    one_field = st.tuples(st.sampled_from(list(valid)) | hostile_text.filter(bool), values)
    return st.one_of(
        one_field.map(lambda case: valid | {case[0]: case[1]}),
        st.sampled_from(list(valid)).map(lambda left_out: {k: v for k, v in valid.items() if k != left_out}),
        st.dictionaries(st.sampled_from(list(valid)), values, max_size=len(valid)),
    )


def posted(user, path: str, data: dict, headers: dict | None = None) -> tuple:
    return user, "post", path, {"data": data, "headers": headers or {}}


def posted_json(path: str, body) -> tuple:
    raw = body if isinstance(body, bytes) else json.dumps(body)
    return None, "post", path, {"data": raw, "content_type": "application/json"}


basic_credentials = st.builds(lambda user, secret: "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode(),
                              hostile_text, hostile_text)  # fmt: skip


def refuse_nul_like_postgresql(execute, sql, params, many, context):
    """PostgreSQL refuses a NUL byte in any text parameter with an error (a 500 unless caught); SQLite keeps it."""
    rows = params if many else [params]
    for row in rows or ():
        values = row.values() if isinstance(row, dict) else row or ()
        if any(isinstance(value, str) and NUL in value for value in values):
            raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return execute(sql, params, many, context)


@pytest.fixture
def forms_world(settings, client):
    """A tool with a policy, a knowledge snippet, an admin and an operator, a registered OAuth client; no rate
    limit or login back-off (each case must reach the view)."""
    settings.TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE = settings.TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT = 0
    make_policy(make_tool("get_weather"))
    domain = Domain.objects.create(name="loyalty", title="Loyalty")
    snippet = KnowledgeSnippet.objects.create(
        domain=domain, action="answer", title="Points expire", text="Old.", source="handbook", owner="team",
        last_reviewed=timezone.localdate(),
    )  # fmt: skip
    registered = client.post("/oauth/register", json.dumps({"redirect_uris": [REDIRECT]}),
                             content_type="application/json").json()["client_id"]  # fmt: skip
    return {"admin": make_user("admin", role="admin"), "operator": make_user("ops", role="operator"),
            "snippet": f"/knowledge/{snippet.key}/", "client_id": registered}  # fmt: skip


def oauth_error(response) -> None:
    """A 400 from an OAuth endpoint a client fetches is an OAuth error object (RFC 6749 §5.2, RFC 7591 §3.2.2)."""
    if response.status_code == 400:
        body = response.json()
        assert isinstance(body.get("error"), str), body


def sign_in(client, user) -> None:
    if user is None:
        client.logout()
    else:
        client.force_login(user)


def campaigns(world: dict) -> dict:
    """name -> (examples, strategy of (user, client method, path, its keyword arguments), OAuth JSON errors?)."""
    client_id, verifier = world["client_id"], "v" * 43
    code = {"grant_type": "authorization_code", "code": "c", "client_id": client_id, "redirect_uri": REDIRECT,
            "code_verifier": verifier}  # fmt: skip
    refresh = {"grant_type": "refresh_token", "refresh_token": "r", "client_id": client_id}
    consent = {"client_id": client_id, "response_type": "code", "redirect_uri": REDIRECT, "code_challenge": verifier,
               "code_challenge_method": "S256", "scope": "mcp", "state": "s", "resource": "http://testserver/mcp",
               "allow": "on"}  # fmt: skip
    policy = {"status": "active", "operation": "read", "risk": "high", "domains": "general", "note": "n",
              "base_version": "1", "replay": "5"}  # fmt: skip
    snippet = {"title": "Points expire", "text": "New.", "source": "handbook", "owner": "team", "action": "answer",
               "review_interval_days": "90"}  # fmt: skip
    registration = {"client_name": "c", "redirect_uris": [REDIRECT], "grant_types": ["authorization_code"],
                    "response_types": ["code"], "token_endpoint_auth_method": "none"}  # fmt: skip
    token = st.tuples(mangled(code) | mangled(refresh), st.none() | basic_credentials).map(
        lambda case: posted(None, "/oauth/token/", case[0], {"Authorization": case[1]} if case[1] else None)
    )
    authorize = st.tuples(st.sampled_from([world["operator"], None]), mangled(consent), st.booleans()).map(
        lambda case: posted(case[0], "/oauth/authorize/", case[1]) if case[2]
        else (case[0], "get", "/oauth/authorize/?" + urlencode(case[1], doseq=True), {})
    )  # fmt: skip
    edit_policy = st.tuples(mangled(policy), st.sampled_from(["", "simulate"])).map(
        lambda case: posted(world["admin"], f"/policies/get_weather/{case[1]}", case[0])
    )
    return {
        "register": (80, (mangled(registration, hostile_text | json_value) | json_value).map(
            lambda body: posted_json("/oauth/register", body)), True),
        "register-raw": (20, st.binary(max_size=200).map(lambda body: posted_json("/oauth/register", body)), True),
        "token": (80, token, True),
        "revoke": (40, mangled({"token": "t", "client_id": client_id, "token_type_hint": "access_token"}).map(
            lambda data: posted(None, "/oauth/revoke/", data)), True),
        "authorize": (80, authorize, False),
        "login": (40, mangled({"username": "admin", "password": "x", "next": "/"}).map(
            lambda data: posted(None, "/login/", data)), False),
        "policy": (60, edit_policy, False),
        "knowledge": (40, mangled(snippet).map(lambda data: posted(world["admin"], world["snippet"], data)), False),
    }  # fmt: skip


FORM_CAMPAIGNS = ["register", "register-raw", "token", "revoke", "authorize", "login", "policy", "knowledge"]


@pytest.mark.django_db
@pytest.mark.parametrize("name", FORM_CAMPAIGNS)
def test_fuzzed_oauth_and_dashboard_forms_get_no_5xx(client, forms_world, name):
    examples, strategy, oauth_json = campaigns(forms_world)[name]
    ran = []

    slow_is_fine = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
                    HealthCheck.large_base_example]  # fmt: skip

    @hypothesis_settings(max_examples=int(examples * SCALE), database=None, suppress_health_check=slow_is_fine)
    @given(case=strategy)
    def fuzz(case):
        user, method, path, arguments = case
        ran.append(case)
        sign_in(client, user)
        response = getattr(client, method)(path, **arguments)
        assert response.status_code < 500, f"{method} {path} -> {response.status_code}: {response.content[:300]!r}"
        if oauth_json:
            oauth_error(response)

    with connection.execute_wrapper(refuse_nul_like_postgresql):
        fuzz()
    assert len(ran) >= examples * SCALE // 2
