"""Demo builtin tools (general, web and infrastructure) with their seed policies."""

from __future__ import annotations

from typing import Any


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


def _policy(domain: str, operation: str, risk: str, aliases: list[str], confirm: bool = False) -> dict[str, Any]:
    return {
        "domains": [domain],
        "operation": operation,
        "risk": risk,
        "workflow_phases": [],
        "aliases": aliases,
        "requires_confirmation": confirm,
        "status": "active",
    }


def _tool(
    name: str,
    description: str,
    properties: dict[str, Any],
    required: list[str] | None,
    policy: dict[str, Any] | None,
    *,
    always_load: bool = False,
    should_defer: bool = True,
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "input_schema": _schema(properties, required),
        "source": "builtin",
        "is_mcp": False,
        "always_load": always_load,
        "should_defer": should_defer,
        "policy": policy,
    }


def _timezone() -> dict[str, Any]:
    return {
        "type": "string",
        "description": "IANA zone (Asia/Ho_Chi_Minh) or a city name (Hanoi, London); defaults to UTC.",
        "maxLength": 64,
    }


def _container() -> dict[str, Any]:
    return {
        "type": "string",
        "description": "Container id (12 or more hex characters) or container name.",
        "pattern": "^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$",
    }


def _service() -> dict[str, Any]:
    return {
        "type": "string",
        "description": "systemd unit name, e.g. nginx or postgresql.service.",
        "pattern": "^[a-zA-Z0-9@._-]{1,128}$",
    }


def _stop_timeout() -> dict[str, Any]:
    return {
        "type": "integer",
        "description": "Seconds to wait for a graceful stop before killing the process.",
        "minimum": 0,
        "maximum": 300,
        "default": 10,
    }


BUILTIN_TOOLS: list[dict[str, Any]] = [
    _tool(
        "tool_search",
        "Search the tool catalog for tools that are not loaded yet and load the best matches. "
        "Use it when none of the visible tools fits the request.",
        {
            "query": {
                "type": "string",
                "description": "What the tool should do, in the user's words.",
                "minLength": 2,
                "maxLength": 200,
            },
            "limit": {
                "type": "integer",
                "description": "How many tools to load.",
                "minimum": 1,
                "maximum": 10,
                "default": 5,
            },
        },
        ["query"],
        _policy("general", "search", "low", ["find a tool", "which tool can", "tìm công cụ"]),
        always_load=True,
        should_defer=False,
    ),
    _tool(
        "calculate",
        "Evaluate an arithmetic expression exactly and return the result. "
        "Use it for any math instead of computing in your head.",
        {
            "expression": {
                "type": "string",
                "description": "Expression with + - * / ** %, parentheses and sqrt, round, min, max, "
                "e.g. (1250000 * 0.08) + 15000.",
                "minLength": 1,
                "maxLength": 500,
            }
        },
        ["expression"],
        _policy("general", "read", "low", ["compute", "math", "how much is", "tính", "tính toán", "bằng bao nhiêu"]),
        always_load=True,
        should_defer=False,
    ),
    _tool(
        "get_current_time",
        "Return the current local time and UTC offset for a time zone or city.",
        {"timezone": _timezone()},
        None,
        _policy(
            "general",
            "read",
            "low",
            ["what time is it", "what time", "current time", "time now", "thời gian", "mấy giờ", "giờ hiện tại"],
        ),
        should_defer=False,
    ),
    _tool(
        "get_current_date",
        "Return today's date and weekday for a time zone or city.",
        {"timezone": _timezone()},
        None,
        _policy(
            "general",
            "read",
            "low",
            ["today's date", "what day is it", "what date", "date today", "ngày hôm nay", "hôm nay là thứ mấy"],
        ),
        should_defer=False,
    ),
    _tool(
        "web_search",
        "Search the public web and return titles, URLs and snippets. "
        "Use it for current events or facts outside the catalog and knowledge base.",
        {
            "query": {"type": "string", "description": "Search query.", "minLength": 2, "maxLength": 300},
            "max_results": {
                "type": "integer",
                "description": "Number of results.",
                "minimum": 1,
                "maximum": 10,
                "default": 5,
            },
        },
        ["query"],
        _policy(
            "web",
            "search",
            "low",
            [
                "google it",
                "search the web",
                "look up online",
                "weather",
                "news",
                "latest",
                "who won",
                "stock price",
                "tìm trên mạng",
                "tra cứu",
                "thời tiết",
                "tin tức",
                "mới nhất",
            ],
        ),  # fmt: skip
        should_defer=False,
    ),
    _tool(
        "dns_lookup",
        "Resolve DNS records of a hostname. Use it to check where a domain points or why mail is not delivered.",
        {
            "hostname": {
                "type": "string",
                "description": "Fully qualified name, e.g. shop.example.com.",
                "pattern": "^(?=.{1,253}$)([a-zA-Z0-9-]{1,63}\\.)*[a-zA-Z0-9-]{1,63}\\.?$",
            },
            "record_type": {
                "type": "string",
                "description": "Record type to query.",
                "enum": ["A", "AAAA", "MX", "TXT", "CNAME", "NS"],
                "default": "A",
            },
        },
        ["hostname"],
        _policy("web", "read", "low", ["resolve domain", "dns records", "nslookup", "dig", "phân giải tên miền"]),
    ),
    _tool(
        "list_containers",
        "List Docker containers on the host with status, image and uptime.",
        {
            "all": {"type": "boolean", "description": "Include stopped containers.", "default": False},
            "name": {"type": "string", "description": "Only containers whose name contains this.", "maxLength": 128},
        },
        None,
        _policy("infrastructure", "list", "low", ["docker ps", "running containers", "danh sách container"]),
    ),
    _tool(
        "inspect_container",
        "Get a container's configuration, state, ports, mounts and last exit code. "
        "Use it before restarting to see why a container is unhealthy.",
        {"container": _container()},
        ["container"],
        _policy("infrastructure", "read", "low", ["container details", "docker inspect", "xem container"]),
    ),
    _tool(
        "start_container",
        "Start a stopped container.",
        {"container": _container()},
        ["container"],
        _policy("infrastructure", "execute", "high", ["docker start", "bật container"], confirm=True),
    ),
    _tool(
        "stop_container",
        "Stop a running container gracefully, killing it after the timeout.",
        {"container": _container(), "timeout_seconds": _stop_timeout()},
        ["container"],
        _policy("infrastructure", "execute", "high", ["docker stop", "tắt container", "dừng container"], confirm=True),
    ),
    _tool(
        "restart_container",
        "Restart a container: stop it gracefully, then start it again.",
        {"container": _container()},
        ["container"],
        _policy("infrastructure", "execute", "high", ["docker restart", "khởi động lại container"], confirm=True),
    ),
    _tool(
        "get_service_status",
        "Get a systemd service's state, uptime and last log lines.",
        {"service": _service()},
        ["service"],
        _policy("infrastructure", "read", "low", ["is the service up", "systemctl status", "trạng thái dịch vụ"]),
    ),
    _tool(
        "restart_service",
        "Restart a systemd service on the host; its clients see a short outage.",
        {"service": _service()},
        ["service"],
        _policy("infrastructure", "execute", "critical", ["systemctl restart", "khởi động lại dịch vụ"], confirm=True),
    ),
    _tool(
        "purge_container_images",
        "Delete unused Docker images from the host to free disk space.",
        {
            "dangling_only": {"type": "boolean", "description": "Only untagged images.", "default": True},
            "older_than_hours": {
                "type": "integer",
                "description": "Only images created more than this many hours ago.",
                "minimum": 0,
                "default": 24,
            },
        },
        None,
        None,  # unpolicied on purpose: the bundle must fail closed on it
    ),
]
