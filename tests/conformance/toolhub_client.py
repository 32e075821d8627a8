"""toolhub's upstream MCP client as the conformance suite's client under test (`conformance client --command`).

The suite starts a scenario's server (and authorization server) and runs this with its URL as the last argument,
the scenario's name in MCP_CONFORMANCE_SCENARIO and its credentials, if any, in MCP_CONFORMANCE_CONTEXT. It does what
toolhub does for an admin: connect (catalog.mcp_client.client); when the server answers 401, sign in with OAuth
(catalog.mcp_oauth.flow: the browser's part is played here by reading the authorization server's redirect, as the
scenarios approve at once), then list the tools and call each with arguments made from its schema. A 403 naming a
scope is answered as the message tells an admin to: ask for that scope too and connect again (once). A server's
elicitation during a call gets what an operator who accepts the console's form as shown sends: the form toolhub builds
from the requestedSchema (agents.console.question_form), prefilled with the schema's defaults, submitted unchanged.
Tokens stay in memory; nothing touches a database.

    .venv/bin/python tests/conformance/toolhub_client.py http://localhost:3000/mcp
"""

import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

import django  # noqa: E402

django.setup()

import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from django.http import QueryDict  # noqa: E402

from agents.console.question_form import QuestionForm  # noqa: E402
from catalog.mcp_client import client as mcp  # noqa: E402
from catalog.mcp_client.callers import Caller  # noqa: E402
from catalog.mcp_oauth import flow  # noqa: E402
from catalog.mcp_oauth.auth import MemoryGrantStore, StoredGrant, UpstreamOAuth  # noqa: E402

NAME = "conformance"
REDIRECT = "http://localhost:3000/callback"  # never listened on: the redirect is read, not followed
SAMPLE = {"number": 1, "integer": 1, "string": "toolhub", "boolean": True, "object": {}, "array": []}


def run(coroutine):
    return mcp._loop_thread().submit(coroutine).result(mcp.mcp_timeout() + 10)


def refusals() -> list:
    connection = mcp._loop_thread().connections.get((NAME, ""))  # the shared connection: (server name, owner)
    return connection.http_answers.refusals if connection is not None else []


def sign_in(url: str, scenario: str, context: dict, scope: str = "") -> UpstreamOAuth:
    settings = flow.ClientSettings(client_id=context.get("client_id", ""),
                                   client_secret=context.get("client_secret", ""), scope=scope)  # fmt: skip
    if scenario.endswith("client-credentials-basic"):
        grant = flow.client_credentials(url, settings)
    else:
        pending = flow.begin_authorization(url, settings, REDIRECT)
        location = httpx2.get(pending.authorize_url).headers.get("location", "")
        back = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
        grant = flow.finish_authorization(pending, code=back.get("code"), state=back.get("state"), iss=back.get("iss"),
                                          error=back.get("error"))  # fmt: skip
    stored = StoredGrant(grant.tokens, grant.expires_at, grant.client, grant.authorization_server,
                         grant.resource_metadata)  # fmt: skip
    print(f"signed in with OAuth (scopes: {grant.scope or 'none named'})")
    return UpstreamOAuth(key=f"{NAME}:{scope}", store=MemoryGrantStore(f"MCP server {NAME!r}", stored))


def as_shown(form: QuestionForm) -> QueryDict:
    """What the browser posts for `form` untouched: each field's initial value (a ticked box is "on")."""
    posted = QueryDict(mutable=True)
    for name, field in form.fields.items():
        value = form.get_initial_for_field(field, name)
        if value is None or value is False:
            continue
        key = form.add_prefix(name)
        if isinstance(value, list):
            posted.setlist(key, [str(item) for item in value])
        else:
            posted[key] = "on" if value is True else str(value)
    return posted


async def operator_accepts_as_shown(params: types.ElicitRequestParams, seconds: float) -> types.ElicitResult:
    schema = params.requested_schema
    answered = QuestionForm(schema, as_shown(QuestionForm(schema)))
    if not answered.is_valid():
        print(f"the form as shown is not a valid answer: {answered.first_error()}")
        return types.ElicitResult(action="decline")
    print(f"the operator accepts the form as shown: {answered.content()}")
    return types.ElicitResult(action="accept", content=answered.content())


OPERATOR = Caller(elicit=operator_accepts_as_shown, cannot_ask="only elicitation is answered here")


def arguments_for(schema: dict) -> dict:
    properties = schema.get("properties") or {}
    return {name: SAMPLE.get(properties.get(name, {}).get("type"), "toolhub") for name in schema.get("required", [])}


def missing_scope() -> str:
    """The scope the server's latest 403 (insufficient_scope) asked for, or ""."""
    for refusal in reversed(refusals()):
        if refusal.status == 403 and "insufficient_scope" in refusal.challenge:
            found = re.search(r'scope="([^"]*)"', refusal.challenge) or re.search(r"scope=([^\s,]+)", refusal.challenge)
            return found.group(1) if found else ""
    return ""


def session(url: str, scenario: str, context: dict) -> None:
    endpoint = mcp.Endpoint(name=NAME, transport=mcp.STREAMABLE_HTTP, url=url)
    try:
        tools = run(mcp._list(endpoint, mcp.mcp_timeout(), mcp.max_tools()))
    except mcp.McpServerUnavailable:
        if not refusals() or refusals()[-1].status != 401:
            raise
        print("the server needs OAuth")
        endpoint = mcp.Endpoint(
            name=NAME, transport=mcp.STREAMABLE_HTTP, url=url, oauth=sign_in(url, scenario, context)
        )
        tools = run(mcp._list(endpoint, mcp.mcp_timeout(), mcp.max_tools()))
    print(f"tools: {[tool['name'] for tool in tools]}")
    for tool in tools:
        result = run(mcp._call(endpoint, tool["name"], arguments_for(tool["input_schema"]), mcp.mcp_timeout(),
                               caller=OPERATOR))  # fmt: skip
        wanted = missing_scope() if result.is_error else ""
        if wanted and endpoint.oauth is not None:
            granted = run(endpoint.oauth.store.load()).tokens.scope or ""
            scope = " ".join(dict.fromkeys([*granted.split(), *wanted.split()]))
            print(f"the server wants the scope {wanted}: connecting again with {scope}")
            run(mcp._disconnect(mcp._loop_thread(), NAME))
            endpoint = mcp.Endpoint(name=NAME, transport=mcp.STREAMABLE_HTTP, url=url,
                                    oauth=sign_in(url, scenario, context, scope))  # fmt: skip
            result = run(mcp._call(endpoint, tool["name"], arguments_for(tool["input_schema"]), mcp.mcp_timeout(),
                                   caller=OPERATOR))  # fmt: skip
        print(f"{tool['name']}: {'error: ' if result.is_error else ''}{result.content[:200]}")


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        session(url, scenario, context)
    except Exception as exc:  # the suite reads stderr and the exit code
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        mcp.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
