"""toolhub settings: one module, every value from the environment.

With nothing set this is the embedded default (SQLite under TOOLHUB_DATA_DIR,
in-memory channel layer, Celery eager, the builtin offline model). Setting
DATABASE_URL / REDIS_URL / TOOLHUB_MODEL_BASE_URL switches each part to the
scaled path. Never add a per-environment copy of this file.
"""

import ipaddress
import json
import os
import secrets
import zoneinfo
from pathlib import Path
from typing import TypedDict

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false).")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number.") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


# Local state of the embedded default (SQLite file, generated secret key).
DATA_DIR = Path(os.environ.get("TOOLHUB_DATA_DIR") or BASE_DIR / "var")

# Debug pages only when asked for: TOOLHUB_DEBUG (or Django's DEBUG) set to 1; `make run` sets it and says so.
_DEBUG_VARIABLE = "TOOLHUB_DEBUG" if os.environ.get("TOOLHUB_DEBUG") else "DEBUG"
DEBUG = env_bool(_DEBUG_VARIABLE, False)
# Set to 0 out loud, debug means a production deployment: a real SECRET_KEY, named hosts, HTTPS-only cookies,
# HSTS, collected static files. Unset keeps the local defaults (generated key, loopback hosts, plain HTTP on
# 127.0.0.1) without debug pages: the embedded default and the test suite run so.
PRODUCTION = not DEBUG and bool(os.environ.get(_DEBUG_VARIABLE))


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "")
    if key:
        return key
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    # Embedded default: generate once, keep it so sessions survive restarts.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Earlier keys, still accepted (sessions, and MCP server secrets encrypted at rest with them:
# catalog.models.secrets).
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "django_htmx",
    "oauth2_provider",
    "template_partials",
    # Sets up OpenTelemetry traces when an OTLP endpoint is configured (toolhub/tracing.py); nothing otherwise.
    "toolhub.apps.ToolhubConfig",
    "catalog",
    "agents",
]
# The demo (its seed data, setup_demo and load_demo_catalog, the Loyalty MCP server) and the routing benchmarks
# (route_eval, route_bench, route_cases, demo_eval, steward_analyze) live beside the shipped apps, never inside
# them: nothing in catalog, agents or toolhub imports either. A deployment leaves both out with TOOLHUB_DEV_APPS=0.
TOOLHUB_DEV_APPS = env_bool("TOOLHUB_DEV_APPS", True)
if TOOLHUB_DEV_APPS:
    INSTALLED_APPS += ["demo", "bench"]

MIDDLEWARE = [
    # Outermost: whatever is logged while a request is handled carries its request id, trace id and channel.
    "toolhub.log_context.RequestContextMiddleware",
    # Outermost, with X-Frame-Options: every answer gets the security headers, those made by the middleware below
    # (/v1's JSON errors, the pool's 503) included; /mcp gets the same from toolhub.security_headers.
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "toolhub.csp.ContentSecurityPolicyMiddleware",
    # Outermost of the app's own: whatever goes wrong below, /v1 answers OpenAI-style JSON.
    "agents.openai_api.middleware.ApiErrorMiddleware",
    "toolhub.db_pool.PoolExhaustedMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After the user is known: times show in their saved zone, else their browser's, else TIME_ZONE.
    "agents.account.middleware.TimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "agents.turns.middleware.WorkflowErrorMiddleware",
]

ROOT_URLCONF = "toolhub.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "toolhub.context_processors.toolhub",
            ],
            "builtins": ["toolhub.role_hints"],
        },
    },
]

WSGI_APPLICATION = "toolhub.wsgi.application"
ASGI_APPLICATION = "toolhub.asgi.application"

# --- database -------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "")
# Connections per process are bounded on PostgreSQL: Django's psycopg pool (CONN_MAX_AGE must then be 0; a
# connection returns to the pool when a request, task or database_sync_to_async call ends). Work that gets
# none within TOOLHUB_DB_POOL_TIMEOUT seconds is answered 503 with Retry-After (toolhub/db_pool.py).
TOOLHUB_DB_POOL_MIN = env_int("TOOLHUB_DB_POOL_MIN", 1)
TOOLHUB_DB_POOL_MAX = env_int("TOOLHUB_DB_POOL_MAX", 10)
TOOLHUB_DB_POOL_TIMEOUT = env_float("TOOLHUB_DB_POOL_TIMEOUT", 10.0)
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": TOOLHUB_DB_POOL_MIN,
            "max_size": TOOLHUB_DB_POOL_MAX,
            "timeout": TOOLHUB_DB_POOL_TIMEOUT,
        }
        # With the pool, Django has psycopg check each connection as it leaves the pool (one empty query) and
        # replace it if the server closed it (PostgreSQL restarted): no request meets a dead connection.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "toolhub.sqlite3",
            # Kept open by each thread that uses it: a connection opened for every request and every
            # database_sync_to_async hop cost ~0.5 ms (the file, the PRAGMAs, Django's SQL functions), twice per
            # /mcp call. A thread's connection closes with the thread.
            "CONN_MAX_AGE": None,
            # Turns run in worker threads beside the request threads. WAL lets pages read while a turn writes;
            # with it, synchronous=NORMAL syncs at checkpoints rather than on every commit (a turn commits each
            # of its events) and loses nothing when the process crashes, only the last commits on power loss.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis: channel layer and Celery -------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py's asyncio pool allows 100 connections by default; a Daphne process holding a few hundred
            # console WebSockets needs more while they join and leave groups at once (else "Too many connections").
            # Its 5 s socket timeout equals channels_redis's 5 s blocking pop, so an idle receive could time out
            # ("Timeout reading from ...") and close the socket: give reads more time than the pop.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "max_connections": 1000, "socket_timeout": 15}],
                "prefix": os.environ.get("TOOLHUB_CHANNEL_PREFIX", "toolhub"),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# The cache holds the rate limits' counts (toolhub/rate_limits.py): shared by every process through Redis on the
# scaled path, the process's own memory on the embedded default. Short timeouts: a Redis fault must not hang requests.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("TOOLHUB_CHANNEL_PREFIX", "toolhub"),
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL or "memory://")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL or "cache+memory://")
# Without a broker the turn runs in-process (embedded default).
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", not (REDIS_URL or os.environ.get("CELERY_BROKER_URL")))
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
# One queue per deployment (or per test run) so two of them on one broker never take each other's turns.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("TOOLHUB_CELERY_QUEUE", "toolhub")
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's consumer, made to survive a Redis restart (toolhub/celery_consumer.py says why it dies otherwise).
CELERY_WORKER_CONSUMER = "toolhub.celery_consumer:Consumer"
# A turn in flight keeps running through a broker fault: its events go to PostgreSQL, and a redelivered copy of
# its task is skipped while the turn's lease is held (agents/turns/watchdog.py).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Periodic work (django-celery-beat is not used: the schedule lives here).
WORKFLOW_CLEANUP_INTERVAL_SECONDS = env_int("TOOLHUB_WORKFLOW_CLEANUP_INTERVAL", 300)
# The turn's deadline: seconds from its start (or its resumption after an approval) to its end, answer or error;
# also the Celery hard limit of its task.
TOOLHUB_TURN_TIME_LIMIT = env_int("TOOLHUB_TURN_TIME_LIMIT", 300)
# Seconds a running turn may go without its worker's heartbeat (sent every sixth of it) before the watchdog
# (agents/turns/watchdog.py) takes it over: queued again if it showed nothing yet, else failed visibly. The watchdog
# runs every third of it on the beat schedule, as a worker starts, and from every stream waiting on a quiet turn.
TOOLHUB_TURN_LEASE = env_float("TOOLHUB_TURN_LEASE", 30.0)
# How long handing a turn to the broker may take (retries included) before the turn fails with broker_unavailable:
# a stream then ends with its error frame and [DONE], a plain request answers 503 (agents/turns/dispatch.py).
TOOLHUB_BROKER_WAIT = env_float("TOOLHUB_BROKER_WAIT", 5.0)
# The Prometheus scrape's bearer token (agents/observability): /metrics is off (404) while it is empty.
TOOLHUB_METRICS_TOKEN = os.environ.get("TOOLHUB_METRICS_TOKEN", "")
# Seconds between runs of the cleanup of expired and revoked OAuth tokens and codes (agents.tasks).
TOOLHUB_OAUTH_CLEAR_TOKENS_INTERVAL = env_int("TOOLHUB_OAUTH_CLEAR_TOKENS_INTERVAL", 3600)
# Retention (agents/turns/retention.py): finished turns older than this many days go with their events, messages and
# routing logs, summarised per day first; 0 keeps everything. It runs every TOOLHUB_RETENTION_INTERVAL seconds on
# the beat schedule, TOOLHUB_RETENTION_BATCH turns per transaction.
TOOLHUB_RETENTION_DAYS = env_int("TOOLHUB_RETENTION_DAYS", 30)
TOOLHUB_RETENTION_INTERVAL = env_int("TOOLHUB_RETENTION_INTERVAL", 3600)
TOOLHUB_RETENTION_BATCH = env_int("TOOLHUB_RETENTION_BATCH", 500)
CELERY_BEAT_SCHEDULE = {
    "cleanup-expired-workflows": {
        "task": "agents.tasks.cleanup_expired_workflows",
        "schedule": WORKFLOW_CLEANUP_INTERVAL_SECONDS,
    },
    "watch-turns": {"task": "agents.tasks.watch_turns", "schedule": TOOLHUB_TURN_LEASE / 3},
    "clear-expired-oauth-tokens": {
        "task": "agents.tasks.clear_expired_oauth_tokens",
        "schedule": TOOLHUB_OAUTH_CLEAR_TOKENS_INTERVAL,
    },
    "apply-retention": {"task": "agents.tasks.apply_retention", "schedule": TOOLHUB_RETENTION_INTERVAL},
    # The overview's closed hours, summed ahead of the page (agents/console/closed_hours.py).
    "close-overview-hours": {"task": "agents.tasks.close_overview_hours", "schedule": 600},
}

# --- model ----------------------------------------------------------------
TOOLHUB_MODEL_BASE_URL = os.environ.get("TOOLHUB_MODEL_BASE_URL", "")
TOOLHUB_MODEL_API_KEY = os.environ.get("TOOLHUB_MODEL_API_KEY", "")
TOOLHUB_MODEL = os.environ.get("TOOLHUB_MODEL", "" if not TOOLHUB_MODEL_BASE_URL else "default")
# "builtin" is the offline rule-based model; "openai" any compatible server.
TOOLHUB_MODEL_PROVIDER = "openai" if TOOLHUB_MODEL_BASE_URL else "builtin"
# One deadline per model call, in seconds, that its retries (before anything streamed) share.
TOOLHUB_MODEL_TIMEOUT = env_float("TOOLHUB_MODEL_TIMEOUT", 60.0)
TOOLHUB_MODEL_RETRIES = env_int("TOOLHUB_MODEL_RETRIES", 2)
TOOLHUB_MODEL_PROFILE = os.environ.get("TOOLHUB_MODEL_PROFILE", "chat-8k")

# --- routing and policy ---------------------------------------------------
TOOLHUB_STEWARD = os.environ.get("TOOLHUB_STEWARD", "rules")
if TOOLHUB_STEWARD not in {"rules", "llm", "hybrid"}:
    raise ImproperlyConfigured(f"TOOLHUB_STEWARD={TOOLHUB_STEWARD!r}: use rules, llm or hybrid.")


class StewardOptions(TypedDict):
    """The shape of TOOLHUB_STEWARD_OPTIONS (not a setting: Django reads only upper-case names)."""

    two_stage_enabled: bool
    analysis_timeout: float
    max_recommended_tools: int
    min_recommended_tools: int
    enable_status_messages: bool
    show_web_search_status: bool
    llm_max_candidates: int


# The steward's options, in the seed's names.
TOOLHUB_STEWARD_OPTIONS: StewardOptions = {
    "two_stage_enabled": env_bool("TOOLHUB_TWO_STAGE_ENABLED", True),
    "analysis_timeout": env_float("TOOLHUB_STEWARD_TIMEOUT", 3.0),
    "max_recommended_tools": env_int("TOOLHUB_MAX_RECOMMENDED_TOOLS", 5),
    "min_recommended_tools": env_int("TOOLHUB_MIN_RECOMMENDED_TOOLS", 0),
    "enable_status_messages": env_bool("TOOLHUB_ENABLE_STATUS_MESSAGES", True),
    "show_web_search_status": env_bool("TOOLHUB_SHOW_WEB_SEARCH_STATUS", True),
    "llm_max_candidates": env_int("TOOLHUB_STEWARD_LLM_CANDIDATES", 50),
}
if not 0 <= TOOLHUB_STEWARD_OPTIONS["min_recommended_tools"] <= TOOLHUB_STEWARD_OPTIONS["max_recommended_tools"] <= 5:
    raise ImproperlyConfigured(
        "Recommended tools must satisfy 0 <= TOOLHUB_MIN_RECOMMENDED_TOOLS <= TOOLHUB_MAX_RECOMMENDED_TOOLS <= 5."
    )
# Status texts by phase; TOOLHUB_STATUS_TEXTS (a JSON object) overrides any of them.
TOOLHUB_STATUS_TEXTS: dict[str, str] = {
    "analysis": "🤵 Consulting the steward...",
    "analysis_complete": "✓ Steward consultation complete",
    "analysis_complete_none": "✓ No further assistance required - answering from general knowledge",
    "fallback": "⚠️ Steward unavailable, proceeding without analysis",
} | json.loads(os.environ.get("TOOLHUB_STATUS_TEXTS") or "{}")
# MCP servers: seconds a connection + call may take before the call is an error result.
TOOLHUB_MCP_TIMEOUT = env_float("TOOLHUB_MCP_TIMEOUT", 30.0)
# Most tools one MCP server may list; a server listing more is refused whole (nothing imported).
TOOLHUB_MCP_MAX_TOOLS = env_int("TOOLHUB_MCP_MAX_TOOLS", 2000)
# Per-user and per-session MCP connections (McpServer.connection_scope), per process: one unused this many seconds is
# closed (a stdio server's process exits), and at most this many are open; past it the least recently used idle one
# is closed, and a call finding every one busy is an error result. Shared connections (one per server) do not count.
TOOLHUB_MCP_IDLE_SECONDS = env_float("TOOLHUB_MCP_IDLE_SECONDS", 300.0)
TOOLHUB_MCP_MAX_CONNECTIONS = env_int("TOOLHUB_MCP_MAX_CONNECTIONS", 64)
# A server's sampling/createMessage during a tool call: at most this many per call (then an error, so a server that
# samples in a loop is cut), each with maxTokens cut to this many.
TOOLHUB_MCP_SAMPLING_PER_CALL = env_int("TOOLHUB_MCP_SAMPLING_PER_CALL", 5)
TOOLHUB_MCP_SAMPLING_MAX_TOKENS = env_int("TOOLHUB_MCP_SAMPLING_MAX_TOKENS", 2048)
# Resumable /mcp streams (agents/mcp_gateway/event_store.py): bytes of sent messages kept per process for clients that
# reconnect with Last-Event-ID (0: none kept, streams not resumable), and the reconnection delay advised to them (0:
# none advised).
TOOLHUB_MCP_EVENT_BUFFER_BYTES = env_int("TOOLHUB_MCP_EVENT_BUFFER_BYTES", 16 * 1024 * 1024)
TOOLHUB_MCP_SSE_RETRY_MS = env_int("TOOLHUB_MCP_SSE_RETRY_MS", 1000)
if TOOLHUB_MCP_EVENT_BUFFER_BYTES < 0 or TOOLHUB_MCP_SSE_RETRY_MS < 0:
    raise ImproperlyConfigured("TOOLHUB_MCP_EVENT_BUFFER_BYTES and TOOLHUB_MCP_SSE_RETRY_MS are 0 or more.")
# Seconds a tool an API key found through tool_search stays listed and callable for that key, across MCP sessions.
TOOLHUB_MCP_FOUND_TTL = env_int("TOOLHUB_MCP_FOUND_TTL", 3600)
# A key that lists every permitted tool (ApiKey.lists_every_permitted_tool) gets them up to this many schema tokens;
# the rest stay callable by name and findable through tool_search.
TOOLHUB_MCP_LIST_ALL_TOKENS = env_int("TOOLHUB_MCP_LIST_ALL_TOKENS", 16000)
# Stdio MCP servers (catalog.mcp_client.stdio_process): each runs in its own directory under this one, with only its
# configured environment, under these limits (0: no limit of that kind). Memory is what it writes to (RLIMIT_DATA):
# Node reserves ~1 GB of address space at start and WebAssembly ~10 GB per memory, so an address-space limit
# (RLIMIT_AS) is off unless set. Processes count every process and thread of toolhub's user (RLIMIT_NPROC).
TOOLHUB_MCP_SERVERS_DIR = Path(os.environ.get("TOOLHUB_MCP_SERVERS_DIR") or DATA_DIR / "mcp-servers")
TOOLHUB_MCP_STDIO_MEMORY_MB = env_int("TOOLHUB_MCP_STDIO_MEMORY_MB", 1024)
TOOLHUB_MCP_STDIO_ADDRESS_SPACE_MB = env_int("TOOLHUB_MCP_STDIO_ADDRESS_SPACE_MB", 0)
TOOLHUB_MCP_STDIO_CPU_SECONDS = env_int("TOOLHUB_MCP_STDIO_CPU_SECONDS", 3600)
TOOLHUB_MCP_STDIO_PROCESSES = env_int("TOOLHUB_MCP_STDIO_PROCESSES", 4096)
TOOLHUB_MCP_STDIO_OPEN_FILES = env_int("TOOLHUB_MCP_STDIO_OPEN_FILES", 1024)
if min(TOOLHUB_MCP_STDIO_MEMORY_MB, TOOLHUB_MCP_STDIO_ADDRESS_SPACE_MB, TOOLHUB_MCP_STDIO_CPU_SECONDS,
       TOOLHUB_MCP_STDIO_PROCESSES, TOOLHUB_MCP_STDIO_OPEN_FILES) < 0:  # fmt: skip
    raise ImproperlyConfigured("The TOOLHUB_MCP_STDIO_* limits are 0 (no limit) or more.")
# Builtin web search: a SearXNG-compatible JSON API; unset -> "not configured".
SEARXNG_URL = os.environ.get("SEARXNG_URL", "")
TOOLHUB_WEB_SEARCH_TIMEOUT = env_float("TOOLHUB_WEB_SEARCH_TIMEOUT", 10.0)
# The seed's special rules name these tools exactly.
TOOLHUB_CALCULATOR_TOOL = "calculate"
TOOLHUB_CLOCK_TOOLS = ("get_current_time", "get_current_date")
TOOLHUB_WEB_SEARCH_TOOL = "web_search"
# Tools whose execution is announced to the user as a status event (phase tool_execution); other calls are not.
TOOLHUB_STATUS_TOOLS = tuple(env_list("TOOLHUB_STATUS_TOOLS", [TOOLHUB_WEB_SEARCH_TOOL]))


def calibrated_min_confidence() -> float:
    """The router's calibrated minimum (agents/router/calibration.py writes it from labelled cases)."""
    try:
        table = json.loads((BASE_DIR / "agents" / "router" / "calibration.json").read_text(encoding="utf-8"))
        return float(table["min_confidence"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.6


# Writes need this much calibrated confidence; by default the value derived from the calibration table.
TOOLHUB_MIN_CONFIDENCE = env_float("TOOLHUB_MIN_CONFIDENCE", calibrated_min_confidence())
TOOLHUB_SIDE_QUERY_MAX_TOOLS = env_int("TOOLHUB_SIDE_QUERY_MAX_TOOLS", 3)
# Schema token gate: one tool over the first is a check warning; the bundle
# never loads more than the second (the rest stay deferred).
TOOLHUB_MAX_TOOL_SCHEMA_TOKENS = env_int("TOOLHUB_MAX_TOOL_SCHEMA_TOKENS", 1500)
TOOLHUB_MAX_BUNDLE_SCHEMA_TOKENS = env_int("TOOLHUB_MAX_BUNDLE_SCHEMA_TOKENS", 4000)
TOOLHUB_ARCHIVE_MAX_NAMES_PER_DOMAIN = env_int("TOOLHUB_ARCHIVE_MAX_NAMES_PER_DOMAIN", 100)
TOOLHUB_SEARCH_TOOL = "tool_search"
# Tool search and routing fuse BM25 with dense embeddings; off -> BM25 only (and the status says so).
TOOLHUB_SEARCH_EMBEDDINGS = env_bool("TOOLHUB_SEARCH_EMBEDDINGS", True)
# The dense models (catalog/search/embeddings.py): tool search ranks with the first, the router reads requests
# (English and Vietnamese) with the second; each is multilingual-e5-small or all-MiniLM-L6-v2.
TOOLHUB_SEARCH_MODEL = os.environ.get("TOOLHUB_SEARCH_MODEL", "all-MiniLM-L6-v2")
TOOLHUB_ROUTING_MODEL = os.environ.get("TOOLHUB_ROUTING_MODEL", "multilingual-e5-small")
for _name, _model in (("TOOLHUB_SEARCH_MODEL", TOOLHUB_SEARCH_MODEL), ("TOOLHUB_ROUTING_MODEL", TOOLHUB_ROUTING_MODEL)):
    if _model not in {"multilingual-e5-small", "all-MiniLM-L6-v2"}:
        raise ImproperlyConfigured(f"{_name}={_model!r}: use multilingual-e5-small or all-MiniLM-L6-v2.")
# The router also ranks by the search model, its scores weighted this much and added to the routing model's
# (catalog/search/ensemble.py; chosen on dev data, docs/benchmarks/index.md); 0 ranks by the routing model alone.
TOOLHUB_ROUTING_SEARCH_WEIGHT = env_float("TOOLHUB_ROUTING_SEARCH_WEIGHT", 1.0)
if not 0 <= TOOLHUB_ROUTING_SEARCH_WEIGHT < float("inf"):
    raise ImproperlyConfigured(
        f"TOOLHUB_ROUTING_SEARCH_WEIGHT={TOOLHUB_ROUTING_SEARCH_WEIGHT}: use a weight of 0 or more."
    )
# A file of the vectors the models made, shared by the processes of one machine (catalog/search/embedding_cache.py):
# off unless set; the test suite sets it. A deployment shares vectors through its database.
TOOLHUB_VECTOR_CACHE = os.environ.get("TOOLHUB_VECTOR_CACHE", "")
# Most OpenMP threads of one e5 call; one while the host has no spare core (catalog/search/embeddings.py says why).
TOOLHUB_ROUTING_THREADS = env_int("TOOLHUB_ROUTING_THREADS", 2)
# Build the search index (and load the embedding model) when a server or worker starts, not on the first request.
TOOLHUB_WARM_START = env_bool("TOOLHUB_WARM_START", True)
# Learning from traffic (agents/turns/learning.py, catalog/search/tool_examples.py): a good turn's request becomes an
# example of its tool.
TOOLHUB_LEARN_FROM_TURNS = env_bool("TOOLHUB_LEARN_FROM_TURNS", True)
TOOLHUB_LEARN_AUTO_APPROVE = env_bool("TOOLHUB_LEARN_AUTO_APPROVE", False)
TOOLHUB_LEARN_PER_OWNER = env_bool("TOOLHUB_LEARN_PER_OWNER", False)
TOOLHUB_LEARN_MAX_PER_CONVERSATION = env_int("TOOLHUB_LEARN_MAX_PER_CONVERSATION", 20)
TOOLHUB_MAX_EXAMPLES_PER_TOOL = env_int("TOOLHUB_MAX_EXAMPLES_PER_TOOL", 50)
# Bounds of a /v1 request (agents/openai_api/body_limits.py): body bytes (413 over), JSON nesting, messages per request.
TOOLHUB_API_MAX_BODY_BYTES = env_int("TOOLHUB_API_MAX_BODY_BYTES", 1024 * 1024)
TOOLHUB_API_MAX_JSON_DEPTH = env_int("TOOLHUB_API_MAX_JSON_DEPTH", 64)
TOOLHUB_API_MAX_MESSAGES = env_int("TOOLHUB_API_MAX_MESSAGES", 1000)
# Bounds of a /mcp request body (agents/mcp_gateway/body_limits.py): bytes (413 over), JSON nesting, messages in a
# batch.
TOOLHUB_MCP_MAX_BODY_BYTES = env_int("TOOLHUB_MCP_MAX_BODY_BYTES", 4 * 1024 * 1024)
TOOLHUB_MCP_MAX_JSON_DEPTH = env_int("TOOLHUB_MCP_MAX_JSON_DEPTH", 64)
TOOLHUB_MCP_MAX_BATCH = env_int("TOOLHUB_MCP_MAX_BATCH", 100)
# Requests per minute (toolhub/rate_limits.py; 0 = no limit): per API key and per user (all their keys) on /v1 and
# /mcp, answered 429 with Retry-After past them; login POSTs per client address.
TOOLHUB_RATE_LIMIT_PER_MINUTE = env_int("TOOLHUB_RATE_LIMIT_PER_MINUTE", 600)
TOOLHUB_USER_RATE_LIMIT_PER_MINUTE = env_int("TOOLHUB_USER_RATE_LIMIT_PER_MINUTE", 1200)
TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE = env_int("TOOLHUB_LOGIN_RATE_LIMIT_PER_MINUTE", 20)
# Login attempts for one username since its last login (from any address, known account or not) before each further
# attempt waits 1, 2, 4... s after the one before, up to the max (toolhub/rate_limits.py; 0 = no per-account limit).
TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT = env_int("TOOLHUB_LOGIN_FAILURES_PER_ACCOUNT", 5)
TOOLHUB_LOGIN_BACKOFF_MAX = env_int("TOOLHUB_LOGIN_BACKOFF_MAX", 300)
# Peers whose X-Forwarded-For names the client for those limits (toolhub/client_address.py): addresses or networks,
# loopback by default, where the shipped HAProxy runs. Anyone else's header is ignored.
TOOLHUB_TRUSTED_PROXIES = env_list("TOOLHUB_TRUSTED_PROXIES", ["127.0.0.0/8", "::1"])
for _proxy in TOOLHUB_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"TOOLHUB_TRUSTED_PROXIES: {_proxy!r} is not an address or network.") from None
TOOLHUB_MAX_STEPS = env_int("TOOLHUB_MAX_STEPS", 6)
# An API request may declare at most this many client tools (OpenAI's own cap is 128).
TOOLHUB_MAX_CLIENT_TOOLS = env_int("TOOLHUB_MAX_CLIENT_TOOLS", 128)
TOOLHUB_APPROVAL_TIMEOUT = env_int("TOOLHUB_APPROVAL_TIMEOUT", 300)
# Four eyes (catalog/policies/four_eyes.py): at these risk levels, and the levels above each, whoever started a turn
# cannot approve its tool calls, and a policy change that loosens such a tool waits for a second operator. "none"
# turns it off. The levels are catalog.models.Risk's (settings load before the apps, so they are spelled out here).
TOOLHUB_FOUR_EYES_RISKS = env_list("TOOLHUB_FOUR_EYES_RISKS", ["high"])
if TOOLHUB_FOUR_EYES_RISKS == ["none"]:
    TOOLHUB_FOUR_EYES_RISKS = []
for _risk in TOOLHUB_FOUR_EYES_RISKS:
    if _risk not in ("low", "medium", "high", "critical"):
        raise ImproperlyConfigured(f"TOOLHUB_FOUR_EYES_RISKS: {_risk!r} is not low, medium, high, critical or none.")
TOOLHUB_WORKFLOW_TTL_SECONDS = env_int("TOOLHUB_WORKFLOW_TTL", 3600)
# Staged flows (agents/turns/staged_flows.py): ordered workflow phases, and the tools whose recommendation
# for a confident create starts the flow. The demo Loyalty domain builds a rule in four steps.
TOOLHUB_WORKFLOW_FLOWS = {
    "loyalty_rule": {
        "phases": ["rule_draft", "rule_formula", "rule_criteria", "rule_submit"],
        "starts_for": ["create_rule", "create_rule_draft"],
    },
}

# --- auth, i18n, static ---------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# --- OAuth 2.1 for /mcp (agents/mcp_gateway/oauth.py; django-oauth-toolkit is the authorization server)
# ---------------- Lifetimes in seconds: an access token, and the refresh token that renews it (rotated on every use).
TOOLHUB_OAUTH_ACCESS_TOKEN_SECONDS = env_int("TOOLHUB_OAUTH_ACCESS_TOKEN_SECONDS", 3600)
TOOLHUB_OAUTH_REFRESH_TOKEN_SECONDS = env_int("TOOLHUB_OAUTH_REFRESH_TOKEN_SECONDS", 30 * 24 * 3600)
# Open dynamic client registration (RFC 7591) at /oauth/register: MCP clients register themselves there. Off: only
# clients an admin creates (admin, OAuth applications) can ask users for access.
TOOLHUB_OAUTH_REGISTRATION = env_bool("TOOLHUB_OAUTH_REGISTRATION", True)
# Named so agents.ApiKey can point at it (the library's models are swappable; toolhub keeps its own).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER = {
    # The OAuth scopes are the API-key scopes that /mcp reads (agents.access.abilities): no chat, /v1 takes API keys
    # only.
    "SCOPES": {
        "mcp": "List and call the tools your role allows, over MCP",
        "read": "Read only: list tools, never call one",
    },
    "DEFAULT_SCOPES": ["mcp"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": TOOLHUB_OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": TOOLHUB_OAUTH_REFRESH_TOKEN_SECONDS,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "PKCE_REQUIRED": True,
    # Loopback redirect URIs match on any port (RFC 8252 §7.3: native clients listen on a port they pick).
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "REQUEST_APPROVAL_PROMPT": "auto",  # consent once per client and scopes while a token of it is valid
    # RFC 9700 (OAuth security BCP): no implicit or password grant, S256 only, tokens never in the query string,
    # RFC 9207 `iss` in the authorization response, tokens stored hashed.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    # advertises registration_endpoint (agents.mcp_gateway.oauth_views.register)
    "DCR_ENABLED": TOOLHUB_OAUTH_REGISTRATION,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
    "OAUTH2_PROTECTED_RESOURCE_NAME": "toolhub MCP",
}

# http redirect URIs stay allowed for loopback only (RFC 8252 native clients; MCP clients listen on 127.0.0.1):
# agents.mcp_gateway.oauth_views.register refuses http for any other host, which the library's W008 cannot see.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
# The zone pages show times in, with its abbreviation, for a viewer who saved none and whose browser has not told its
# own (agents/account); turns read the clock in it. Stored times are UTC whatever this says.
TIME_ZONE = os.environ.get("TOOLHUB_TIME_ZONE", "UTC").strip() or "UTC"
try:
    zoneinfo.ZoneInfo(TIME_ZONE)
except (zoneinfo.ZoneInfoNotFoundError, ValueError):
    raise ImproperlyConfigured(
        f"TOOLHUB_TIME_ZONE={TIME_ZONE!r} is not a time zone name (e.g. Asia/Ho_Chi_Minh)"
    ) from None
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# collectstatic's target; outside production files are served from the finders instead.
STATIC_ROOT = os.environ.get("STATIC_ROOT") or (DATA_DIR / "staticfiles" if PRODUCTION else None)
# Serve straight from the finders while developing; hashed files in production.
WHITENOISE_USE_FINDERS = not PRODUCTION
# How long a browser reuses an unhashed static file (every file outside production) before asking again. WhiteNoise's
# 0 under DEBUG made each page ask for its stylesheet and scripts again; the render-blocking stylesheet's 304 then
# held the first paint (bench/scripts/page_bench.py, bench/results/2026-12-benchmark-notes.md). Hashed files in
# production are cached for ever.
WHITENOISE_MAX_AGE = env_int("TOOLHUB_STATIC_MAX_AGE", 60)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- security (production when DEBUG=0 is set) -------------------------------
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", PRODUCTION)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", PRODUCTION)
if env_bool("TOOLHUB_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy of every response (toolhub/csp.py): TOOLHUB_CSP replaces the whole policy, "off" sends
# none; TOOLHUB_CSP_REPORT_ONLY=1 sends it as Content-Security-Policy-Report-Only. CSP Level 3's 'self' in
# connect-src also allows ws:/wss: to this host (the console's WebSocket). data: images and audio: MCP results.
TOOLHUB_DEFAULT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
_CSP = os.environ.get("TOOLHUB_CSP") or TOOLHUB_DEFAULT_CSP
TOOLHUB_CONTENT_SECURITY_POLICY = "" if _CSP.strip().lower() == "off" else _CSP
TOOLHUB_CSP_REPORT_ONLY = env_bool("TOOLHUB_CSP_REPORT_ONLY", False)

# OpenTelemetry traces are on when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, with
# the other standard OTEL_* variables (toolhub/tracing.py). Spans carry message contents, tool arguments and results
# only when this is on: off by default, for privacy.
TOOLHUB_TRACE_CONTENT = env_bool("TOOLHUB_TRACE_CONTENT", False)
# A span per SQL query (the psycopg instrumentation) only when this is on: a turn runs about 60 queries, and their
# spans cost it about 13 % of its time (docs/operations/monitoring.md, "Overhead"). Off by default.
TOOLHUB_TRACE_SQL = env_bool("TOOLHUB_TRACE_SQL", False)

# The currency of the model profiles' prices (ModelProfile.input_price, output_price): the overview's costs are shown
# in it. A label only: toolhub converts nothing.
TOOLHUB_CURRENCY = os.environ.get("TOOLHUB_CURRENCY", "USD").strip()[:8] or "USD"

# Every process (Daphne, Celery, manage.py) logs through this: plain lines for people (make run), one JSON object a
# line for a log pipeline (TOOLHUB_LOG_FORMAT=json); both carry the request, turn, conversation, trace and channel
# of the work a line belongs to (toolhub/log_context.py). Celery leaves the root logger to it (below).
TOOLHUB_LOG_FORMAT = os.environ.get("TOOLHUB_LOG_FORMAT", "plain").strip().lower()
if TOOLHUB_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"TOOLHUB_LOG_FORMAT must be plain or json, not {TOOLHUB_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "toolhub.log_context.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "toolhub.log_context.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": TOOLHUB_LOG_FORMAT, "filters": ["context"]}
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "bm25s": {"level": "WARNING"}},
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
