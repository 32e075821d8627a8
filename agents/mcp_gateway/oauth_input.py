"""What every OAuth endpoint (agents.mcp_gateway.oauth_urls) refuses before its view runs: 400, never a 500.

Refused: a NUL byte or a lone surrogate anywhere in the request's parameters (query string, form fields, names
included), in the strings of a JSON body, or in Basic client credentials (PostgreSQL stores neither, and the
library looks every client and code up in the database); a JSON body nested deeper than
TOOLHUB_API_MAX_JSON_DEPTH; a body over Django's upload limits (413); and an identifier outside its grammar: client
ids, codes, tokens and nonces are visible ASCII (RFC 6749 Appendix A) no longer than their columns, PKCE
challenges and verifiers 43-128 unreserved characters (RFC 7636 §4.1-4.2). The answer is an OAuth error object
({"error", "error_description"}: `invalid_client_metadata` for registration, RFC 7591; `invalid_request`
elsewhere, RFC 6749 §5.2), or the consent page's error for the browser's authorize page. Only checks: what passes
is the views' and the library's to judge.
"""

import base64
import binascii
import functools
import json
import re
from urllib.parse import unquote_plus

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render

from agents.openai_api.body_limits import UNSTORABLE, json_depth, unstorable_field

VISIBLE_ASCII = r"[\x20-\x7e]"  # RFC 6749 Appendix A's VSCHAR
PKCE = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
IDENTIFIERS = {
    # name: (grammar, longest accepted): the columns are django-oauth-toolkit's (client_id, Grant.code, nonce)
    "client_id": (re.compile(f"{VISIBLE_ASCII}+"), 255),
    "code": (re.compile(f"{VISIBLE_ASCII}+"), 255),
    "refresh_token": (re.compile(f"{VISIBLE_ASCII}+"), 255),
    "token": (re.compile(f"{VISIBLE_ASCII}+"), 255),
    "nonce": (re.compile(f"{VISIBLE_ASCII}*"), 255),
    "code_challenge": (PKCE, 128),
    "code_verifier": (PKCE, 128),
}


class Malformed(Exception):
    """Why a request is refused; the message is safe to show (it names a parameter, never repeats its value)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def shown(name: str) -> str:
    return name.encode("unicode_escape").decode()[:40]


def check_parameters(pairs) -> None:
    """Raises Malformed for a NUL byte or lone surrogate in a name or value, or an identifier outside its grammar."""
    for name, value in pairs:
        if UNSTORABLE.search(name) or UNSTORABLE.search(value):
            raise Malformed(f"The parameter {shown(name)} contains a NUL byte or a lone surrogate.")
        grammar = IDENTIFIERS.get(name)
        if grammar is not None and (len(value) > grammar[1] or not grammar[0].fullmatch(value)):
            raise Malformed(f"The parameter {name} is malformed.")


def basic_credentials(header: str) -> list[tuple[str, str]]:
    """client_id and client_secret from `Authorization: Basic ...`, decoded as the library decodes them (RFC 6749
    §2.3.1: base64 of the form-encoded id and secret); nothing when the header carries none it could read."""
    scheme, _, encoded = header.partition(" ")
    if scheme != "Basic":
        return []
    try:
        decoded = base64.b64decode(encoded).decode()
    except (binascii.Error, ValueError):  # the library refuses these itself (invalid_client)
        return []
    client_id, colon, secret = decoded.partition(":")
    return [("client_id", unquote_plus(client_id)), ("client_secret", unquote_plus(secret))] if colon else []


def check_request(request) -> None:
    """Raises Malformed when the request carries what no OAuth endpoint here accepts (the module's docstring)."""
    try:
        body = request.body  # first: a multipart form read as POST could not be read again
        check_parameters((name, value) for name, values in request.GET.lists() for value in values)
        check_parameters((name, value) for name, values in request.POST.lists() for value in values)
    except RequestDataTooBig:
        raise Malformed("The request body is too large.", 413) from None
    except (SuspiciousOperation, MultiPartParserError):  # too many form fields, a broken multipart body
        raise Malformed("The request body is not a well-formed form.") from None
    check_parameters(basic_credentials(request.headers.get("Authorization", "")))
    if request.content_type == "application/json" and body:
        limit = settings.TOOLHUB_API_MAX_JSON_DEPTH
        if json_depth(body) > limit:
            raise Malformed(f"The JSON body nests deeper than {limit} levels.")
        try:
            payload = json.loads(body)
        except ValueError:  # the view says what is wrong with it
            return
        field = unstorable_field(payload, "")
        if field is not None:
            raise Malformed(f"{shown(field) or 'The body'} contains a NUL byte or a lone surrogate.")


def refusing_malformed(view, *, error: str = "invalid_request"):
    """`view`, answered 400 with an OAuth error object `error` when check_request refuses the request."""

    @functools.wraps(view)
    def checked(request, *args, **kwargs):
        try:
            check_request(request)
        except Malformed as malformed:
            return JsonResponse({"error": error, "error_description": str(malformed)}, status=malformed.status)
        return view(request, *args, **kwargs)

    return checked


def refusing_malformed_page(view, *, template: str):
    """`view` (a page a browser navigates to), answered with `template`'s error, 400, when the request is refused."""

    @functools.wraps(view)
    def checked(request, *args, **kwargs):
        try:
            check_request(request)
        except Malformed as malformed:
            context = {"error": {"error": "invalid_request", "description": str(malformed)}}
            return render(request, template, context, status=malformed.status)
        return view(request, *args, **kwargs)

    return checked
