"""Web search through a SearXNG JSON API and DNS lookups; never follows a non-http(s) URL or waits past its timeout.

Configuration: `SEARXNG_URL` (base URL of a SearXNG instance with the JSON
format enabled) and `TOOLHUB_WEB_SEARCH_TIMEOUT` (seconds, default 10), read
from Django settings when they are configured and define them, otherwise from
the environment. A/AAAA records come from the system resolver
(`getaddrinfo`, so /etc/hosts counts); MX, TXT, CNAME and NS need dnspython.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from agents.models import TOOL_EXECUTION_PHASE

DEFAULT_SEARCH_TIMEOUT = 10.0
DEFAULT_MAX_RESULTS = 5
MAX_RESULTS = 10
MAX_RESPONSE_BYTES = 2_000_000
MAX_SNIPPET_CHARS = 500
DNS_TIMEOUT = 5.0
ADDRESS_FAMILIES = {"A": socket.AF_INET, "AAAA": socket.AF_INET6}
RESOLVER_RECORD_TYPES = ("MX", "TXT", "CNAME", "NS")
# Like the tool schema's pattern, plus "_" for names such as _dmarc.example.com.
HOSTNAME = re.compile(r"(?=.{1,253}$)([A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.?")
NOT_CONFIGURED = "Web search is not configured (set SEARXNG_URL)."


class WebSearchError(Exception):
    """The search could not be done; the message says why in words for the model and the user."""


class DnsLookupError(Exception):
    """The name could not be resolved; the message says why."""


def web_search(
    query: str,
    max_results: int = DEFAULT_MAX_RESULTS,
    *,
    emit: Callable[..., None] | None = None,
    arguments: dict | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
) -> dict:
    """{"query", "results": [{"title", "url", "snippet"}]} from SearXNG; raises WebSearchError.

    Just before the request it emits the search status (phase tool_execution: web_search announces itself);
    `arguments` (the tool call's) ride along with it.
    """
    query = " ".join(str(query).split())
    if not query:
        raise WebSearchError("The search query is empty.")
    count = _clamp_results(max_results)
    base = str((base_url if base_url is not None else _setting("SEARXNG_URL", "")) or "").strip()
    if not base:
        raise WebSearchError(NOT_CONFIGURED)
    if not base.lower().startswith(("http://", "https://")):
        raise WebSearchError("SEARXNG_URL must be an http:// or https:// URL.")
    seconds = timeout if timeout is not None else _timeout_setting()
    url = base.rstrip("/") + "/search?" + urllib.parse.urlencode({"q": query, "format": "json"})
    if emit is not None:
        emit(
            TOOL_EXECUTION_PHASE,
            f'🔍 Searching the web: "{query}"',
            tool_name="web_search",
            arguments=arguments if arguments is not None else {"query": query, "max_results": count},
        )
    body = _fetch(url, seconds)
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        raise WebSearchError("Web search failed: the search service did not answer with JSON.") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise WebSearchError("Web search failed: the search service's answer has no result list.")
    results = [_result(item) for item in payload["results"] if isinstance(item, dict) and item.get("url")]
    return {"query": query, "results": results[:count]}


def dns_lookup(hostname: str, record_type: str = "A", *, timeout: float = DNS_TIMEOUT, resolver=None) -> dict:
    """{"hostname", "record_type", "records": [...]}; raises DnsLookupError. `resolver` is a dnspython Resolver."""
    name = str(hostname).strip()
    kind = str(record_type or "A").upper()
    if HOSTNAME.fullmatch(name) is None:
        raise DnsLookupError(f"{name[:80]!r} is not a valid hostname (letters, digits, hyphens and dots).")
    if kind in ADDRESS_FAMILIES:
        records = _addresses(name, kind, timeout)
    elif kind in RESOLVER_RECORD_TYPES:
        records = _resolver_records(name, kind, timeout, resolver)
    else:
        raise DnsLookupError(f"Record type {kind} is not supported; use A, AAAA, MX, TXT, CNAME or NS.")
    return {"hostname": name, "record_type": kind, "records": records}


def _setting(name: str, default):
    """The Django setting when settings are configured and define it, else the environment variable."""
    from django.conf import settings

    if settings.configured or os.environ.get("DJANGO_SETTINGS_MODULE"):
        value = getattr(settings, name, None)
        if value is not None:
            return value
    return os.environ.get(name, default)


def _timeout_setting() -> float:
    try:
        seconds = float(_setting("TOOLHUB_WEB_SEARCH_TIMEOUT", DEFAULT_SEARCH_TIMEOUT))
    except (TypeError, ValueError):
        return DEFAULT_SEARCH_TIMEOUT
    return seconds if seconds > 0 else DEFAULT_SEARCH_TIMEOUT


def _clamp_results(max_results) -> int:
    try:
        return min(max(int(max_results), 1), MAX_RESULTS)
    except (TypeError, ValueError):
        return DEFAULT_MAX_RESULTS


def _fetch(url: str, seconds: float) -> bytes:
    """The response body; the whole exchange is bounded by `seconds` (each socket wait and the read loop)."""
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "toolhub"})
    deadline = time.monotonic() + seconds
    timed_out = WebSearchError(f"Web search timed out after {seconds:g} seconds.")
    try:
        with urllib.request.urlopen(request, timeout=seconds) as response:  # scheme checked by the caller
            chunks, size = [], 0
            while chunk := response.read(65536):
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise WebSearchError("Web search failed: the search service's answer is too large.")
                if time.monotonic() > deadline:
                    raise timed_out
                chunks.append(chunk)
            return b"".join(chunks)
    except urllib.error.HTTPError as error:
        error.close()
        raise WebSearchError(f"Web search failed: the search service answered HTTP {error.code}.") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise timed_out from None
        raise WebSearchError(f"Web search failed: could not reach the search service ({error.reason}).") from None
    except TimeoutError:
        raise timed_out from None
    except (OSError, ValueError) as error:  # connection reset, malformed HTTP, bad URL
        raise WebSearchError(f"Web search failed: {error.__class__.__name__} talking to the search service.") from None


def _result(item: dict) -> dict:
    snippet = " ".join(str(item.get("content") or "").split())
    if len(snippet) > MAX_SNIPPET_CHARS:
        snippet = snippet[: MAX_SNIPPET_CHARS - 1] + "…"
    return {"title": str(item.get("title") or "").strip(), "url": str(item["url"]), "snippet": snippet}


def _addresses(name: str, kind: str, timeout: float) -> list[str]:
    """getaddrinfo in a daemon thread, so a stuck resolver costs a thread, never the caller's deadline."""
    outcome: dict[str, object] = {}

    def resolve() -> None:
        try:
            outcome["infos"] = socket.getaddrinfo(name, None, ADDRESS_FAMILIES[kind], socket.SOCK_STREAM)
        except (OSError, UnicodeError) as error:
            outcome["error"] = error

    worker = threading.Thread(target=resolve, name=f"dns-lookup {name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise DnsLookupError(f"DNS lookup of {name} timed out after {timeout:g} seconds.")
    if "error" in outcome:
        error = outcome["error"]
        reason = getattr(error, "strerror", None) or str(error) or error.__class__.__name__
        raise DnsLookupError(f"Could not resolve {name} ({kind}): {reason}.")
    addresses = []
    for *_, sockaddr in outcome["infos"]:
        if sockaddr[0] not in addresses:
            addresses.append(sockaddr[0])
    return addresses


def _resolver_records(name: str, kind: str, timeout: float, resolver) -> list[str]:
    try:
        import dns.exception
        import dns.resolver
    except ImportError:
        raise DnsLookupError(
            f"Record type {kind} needs a DNS resolver library (dnspython) that is not installed; A and AAAA work."
        ) from None
    try:
        active = resolver or dns.resolver.Resolver()
        answer = active.resolve(name, kind, lifetime=timeout, search=False)
    except dns.resolver.NXDOMAIN:
        raise DnsLookupError(f"{name} does not exist (NXDOMAIN).") from None
    except dns.resolver.NoAnswer:
        return []
    except dns.exception.Timeout:
        raise DnsLookupError(f"DNS lookup of {name} ({kind}) timed out after {timeout:g} seconds.") from None
    except dns.exception.DNSException as error:
        raise DnsLookupError(f"DNS lookup of {name} ({kind}) failed: {error}") from None
    # An answer is a set; MX in priority order (lowest preference first), the others sorted, so answers are stable.
    records = sorted(answer, key=lambda record: (getattr(record, "preference", 0), record.to_text()))
    return [_record_text(record) for record in records]


def _record_text(record) -> str:
    if hasattr(record, "exchange"):  # MX
        return f"{record.preference} {record.exchange.to_text()}"
    if hasattr(record, "strings"):  # TXT: one record may be split into several strings
        return b"".join(record.strings).decode("utf-8", errors="replace")
    return record.to_text()
