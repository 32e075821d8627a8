"""Conversation data: messages, turns and their events, routing logs, workflows, model profiles, and each user's own
display preferences (their time zone).

Status and event-type constants are defined here once and used everywhere.
Workflow concurrency (version CAS, idempotency) is enforced by the database
through the constraints below, never by check-then-write in Python.
"""

import functools
import math
import zoneinfo
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.fields.json import KeyTransform
from django.utils.functional import cached_property

from catalog.models import Action


class ActionWord(models.Model):
    """A word or phrase that signals an action, in any language; the router reads these, never code."""

    phrase = models.CharField(max_length=100, unique=True)
    action = models.CharField(max_length=16, choices=Action.choices)

    class Meta:
        ordering = ["action", "phrase"]

    def __str__(self):
        return f"{self.phrase} -> {self.action}"

    def save(self, *args, **kwargs):
        self.phrase = " ".join(self.phrase.lower().split())
        super().save(*args, **kwargs)


class MoodWord(models.Model):
    """A word or phrase that marks a request as a question or as a request for an action.

    The router reads a question ("M-42 còn bao nhiêu điểm?", "do we have a rule for
    weekends?") as a wish to read: a question that asks for no action never decides a
    write (agents/router/fusion.py). A request cue ("can you", "giúp", "được không")
    overrides it: "tạm dừng SUMMER24 được không?" asks for the pause.
    """

    class Mood(models.TextChoices):
        QUESTION = "question", "question"
        REQUEST = "request", "request for an action"

    class Position(models.TextChoices):
        ANYWHERE = "anywhere", "anywhere"
        START = "start", "first words of the request"
        END = "end", "last words of the request"

    phrase = models.CharField(max_length=100)
    mood = models.CharField(max_length=16, choices=Mood.choices)
    position = models.CharField(max_length=16, choices=Position.choices, default=Position.ANYWHERE)

    class Meta:
        ordering = ["mood", "phrase"]
        constraints = [models.UniqueConstraint(fields=["phrase", "position"], name="mood_word_unique_phrase")]

    def __str__(self):
        return f"{self.phrase} -> {self.mood} ({self.position})"

    def save(self, *args, **kwargs):
        self.phrase = " ".join(self.phrase.lower().split())
        super().save(*args, **kwargs)


class IntentExample(models.Model):
    """A request and what it wants (action, domains), in any language: evidence for the router.

    Tool-specific requests are ToolExamples (catalog); these label the rest: requests
    answered from general knowledge with no tool (action answer, no domains), and
    requests whose action and domains are clear before any tool is. The router ranks
    them by meaning (agents/router), so they teach wordings, not keywords.
    """

    MAX_TEXT_CHARS = 1000

    text = models.CharField(max_length=MAX_TEXT_CHARS, unique=True)
    action = models.CharField(max_length=16, choices=Action.choices)
    domains = models.JSONField(default=list, blank=True, help_text='Domain names, e.g. ["loyalty", "members"].')
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["action", "text"]

    def __str__(self):
        return f"{self.text[:60]} -> {self.action}"

    def save(self, *args, **kwargs):
        self.text = " ".join(str(self.text or "").split())
        super().save(*args, **kwargs)

    def clean(self):
        self.text = " ".join(str(self.text or "").split())
        if not self.text:
            raise ValidationError({"text": "An example needs the request's text."})
        if not isinstance(self.domains, list) or not all(isinstance(d, str) for d in self.domains):
            raise ValidationError({"domains": "A list of domain names."})


def validate_base_url(value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValidationError("An http(s) URL of an OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1.")


validate_env_name = RegexValidator(
    r"^[A-Za-z_][A-Za-z0-9_]*$", "The name of an environment variable (letters, digits, _), not the key itself."
)


class ModelProfile(models.Model):
    """One model the API and the console offer: the upstream model it calls and its token budget.

    Memory gets what the window leaves after the fixed parts. The upstream fields left empty fall back to
    TOOLHUB_MODEL, TOOLHUB_MODEL_BASE_URL and TOOLHUB_MODEL_API_KEY (agents.providers.upstream_of). The API
    key is never stored: only the name of the environment variable that holds it.
    """

    name = models.SlugField(max_length=100, unique=True)
    upstream_model = models.CharField(
        max_length=200, blank=True, help_text="Model name sent to the model server; empty: TOOLHUB_MODEL."
    )
    base_url = models.CharField(
        "base URL",
        max_length=500,
        blank=True,
        validators=[validate_base_url],
        help_text="OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1; empty: TOOLHUB_MODEL_BASE_URL.",
    )
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        validators=[validate_env_name],
        help_text="Name of the environment variable holding the server's API key (never the key itself); "
        "empty: TOOLHUB_MODEL_API_KEY.",
    )
    context_window = models.PositiveIntegerField()
    max_output_tokens = models.PositiveIntegerField()
    reserved_result_tokens = models.PositiveIntegerField(help_text="Kept free for tool results.")
    # What the model's provider charges, per million tokens (empty: no price, and no cost is shown for its turns).
    input_price = models.DecimalField(
        "input price", max_digits=10, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="Per million prompt tokens, in TOOLHUB_CURRENCY (USD unless set); empty: no cost shown.",
    )  # fmt: skip
    output_price = models.DecimalField(
        "output price", max_digits=10, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="Per million completion tokens, in TOOLHUB_CURRENCY (USD unless set); empty: no cost shown.",
    )  # fmt: skip

    class Meta:
        ordering = ["context_window", "name"]

    def __str__(self):
        return f"{self.name} ({self.context_window} tokens)"

    def clean(self):
        fixed = (self.max_output_tokens or 0) + (self.reserved_result_tokens or 0)
        if self.context_window is not None and fixed >= self.context_window:
            raise ValidationError("Output and reserved result tokens must leave room in the context window.")


def default_profile() -> ModelProfile:
    """The `toolhub` model: TOOLHUB_MODEL_PROFILE (its upstream and budget), or an unsaved 8K profile calling
    TOOLHUB_MODEL when that is absent."""
    profile = ModelProfile.objects.filter(name=settings.TOOLHUB_MODEL_PROFILE).first()
    return profile or ModelProfile(
        name="default", context_window=8192, max_output_tokens=1024, reserved_result_tokens=1024
    )


class Conversation(models.Model):
    class Channel(models.TextChoices):
        """Which door the conversation came through (the console chat, the OpenAI-compatible API, a tools/call over
        /mcp); the same words as the logs' `channel` (toolhub.log_context)."""

        CONSOLE = "console", "console"
        API = "api", "API"
        MCP = "mcp", "MCP"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    model_profile = models.ForeignKey(ModelProfile, null=True, blank=True, on_delete=models.SET_NULL)
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.CONSOLE, db_index=True)
    # The key that started it (API and MCP); kept as a name once the key is deleted, so the page still says whose.
    api_key = models.ForeignKey(
        "ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations"
    )
    api_key_name = models.CharField(max_length=100, blank=True)
    # What an API client says of the request (OpenAI's `user` and `metadata`, agents/openai_api/attribution.py):
    # whom it is for, and its tags ({key: value}, strings); searchable in the console.
    end_user = models.CharField(max_length=256, blank=True, db_index=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self):
        return self.title or f"conversation {self.pk}"


class Turn(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"  # paused on an approval; resumes from a new task when decided
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"  # stopped by an operator (agents.turns.cancellation)

    ENDED = (Status.DONE, Status.FAILED, Status.CANCELLED)  # nothing runs it again

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    model = models.CharField(max_length=200, blank=True)
    two_stage = models.BooleanField(default=True, help_text="Consult the steward before the model.")
    # An API client's own tools (agents.turns.client_tools): offered to the model, never run by toolhub.
    client_tools = models.JSONField(default=list, blank=True, help_text="OpenAI function definitions.")
    tool_choice = models.JSONField(null=True, blank=True, help_text='"none", "auto", "required" or a named function.')
    parallel_tool_calls = models.BooleanField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The lease of a running turn (agents/turns/watchdog.py): which run holds it, when its worker last beat, and when
    # the turn is due (TOOLHUB_TURN_TIME_LIMIT after its first start, or after it resumed from an approval).
    attempt = models.PositiveSmallIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    # When its task was last handed to the broker (agents/turns/dispatch.py): a turn still queued a lease after that
    # lost its task (a broker that restarted without persistence) and is handed over again by the watchdog.
    published_at = models.DateTimeField(null=True, blank=True)
    # What its model calls were sent and what the model wrote, in toolhub's own count, set when the turn ends
    # (agents/turns/lifecycle.py `spent`): what the overview's costs sum.
    prompt_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "created_at"]),
            # Retention's scan (agents/turns/retention.py): finished turns oldest first, past the cutoff. The condition
            # spells ENDED out: Meta cannot read the class's own names.
            models.Index(
                fields=["finished_at", "id"],
                name="turn_finished_for_retention",
                condition=Q(status__in=["done", "failed", "cancelled"]),
            ),
            # Turn search (agents/console/turn_search.py): the newest turns first, a page at a time.
            models.Index(fields=["-created_at", "-id"], name="turn_newest_first"),
        ]

    def __str__(self):
        return f"turn {self.pk} ({self.status})"

    @property
    def duration_ms(self) -> int | None:
        if self.started_at and self.finished_at:
            return int((self.finished_at - self.started_at).total_seconds() * 1000)
        return None


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    # A tool message of an MCP tool: the whole result as its server sent it (content blocks, structuredContent);
    # `content` is what the model read of it (non-text blocks summarised, cut to the result budget).
    result = models.JSONField(null=True, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "id"]
        indexes = [
            # Retention's scan of messages no turn owns (an API request's earlier messages), oldest first.
            models.Index(fields=["created_at", "id"], name="message_without_turn", condition=Q(turn__isnull=True)),
        ]

    def __str__(self):
        return f"{self.role}: {self.content[:60]}"

    def clean(self):
        if self.role == self.Role.TOOL and not self.tool_call_id:
            raise ValidationError({"tool_call_id": "A tool message answers a tool call and needs its id."})
        if self.tool_calls and self.role != self.Role.ASSISTANT:
            raise ValidationError({"tool_calls": "Only assistant messages carry tool calls."})


# The status phase of a tool announcing that it runs (the tools in TOOLHUB_STATUS_TOOLS; web_search by default):
# the runtime and the builtin tools both name it.
TOOL_EXECUTION_PHASE = "tool_execution"


class TurnEvent(models.Model):
    """One step of a turn, stored before it is broadcast so streams can replay it."""

    class Type(models.TextChoices):
        STATUS = "status"
        ROUTING = "routing"
        TOOL_CALL = "tool_call"
        TOOL_RESULT = "tool_result"
        DELTA = "delta"
        APPROVAL_REQUIRED = "approval_required"
        ERROR = "error"
        DONE = "done"

    TOOL_TYPES = (Type.TOOL_CALL, Type.TOOL_RESULT)  # a tool call and its result, both naming the tool

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="events")
    sequence = models.PositiveIntegerField()
    type = models.CharField(max_length=32, choices=Type.choices)
    phase = models.CharField(max_length=32, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["turn", "sequence"]
        constraints = [models.UniqueConstraint(fields=["turn", "sequence"], name="turn_event_sequence_unique")]
        indexes = [
            # One tool's calls and results over a period (agents/console/tool_activity.py): a few rows among all the
            # streamed pieces. The expression is the one `payload__tool_name=...` compares (tool_events); the
            # condition spells TOOL_TYPES out: Meta cannot read the class's own names.
            models.Index(
                KeyTransform("tool_name", "payload"),
                F("created_at"),
                name="turn_event_tool_calls",
                condition=Q(type__in=["tool_call", "tool_result"]),
            ),
            # Every tool's calls and results of the last hour (/metrics at each scrape): the few recent ones, not a
            # scan of all the tool events retention keeps.
            models.Index(
                fields=["created_at"],
                name="turn_event_tool_calls_recent",
                condition=Q(type__in=["tool_call", "tool_result"]),
            ),
        ]

    def __str__(self):
        return f"turn {self.turn_id} #{self.sequence} {self.type}"

    @classmethod
    def tool_events(cls, name: str):
        """The calls of tool `name` and their results (the rows the tool index holds)."""
        return cls.objects.filter(type__in=cls.TOOL_TYPES, payload__tool_name=name)


class RoutingLog(models.Model):
    """What the steward decided and what the model was shown, for one request."""

    turn = models.OneToOneField(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="routing_log")
    query = models.TextField()
    intent = models.CharField(max_length=32, blank=True)
    decision = models.JSONField(help_text="action, domains, confidence, phase, side_query")
    recommended = models.JSONField(default=list, blank=True)
    called = models.JSONField(default=list, blank=True, help_text="Tools the model actually called.")
    knowledge = models.JSONField(default=list, blank=True, help_text="[{key, version, stale}] injected.")
    two_stage = models.BooleanField(default=True, help_text="False when the request switched the steward off.")
    exposed = models.JSONField(default=list, blank=True, help_text="Tools loaded with full schemas.")
    deferred = models.JSONField(default=list, blank=True)
    denied = models.JSONField(default=list, blank=True, help_text="[{name, reason}]")
    loaded_schema_tokens = models.PositiveIntegerField(default=0)
    deferred_listing_tokens = models.PositiveIntegerField(default=0)
    catalog_schema_tokens = models.PositiveIntegerField(default=0, help_text="All enabled tools' schemas.")
    steward_mode = models.CharField(max_length=16, blank=True)
    steward_ms = models.PositiveIntegerField(null=True, blank=True)
    turn_ms = models.PositiveIntegerField(null=True, blank=True)
    # Of turn_ms, the time the turn waited for people (its approvals, from request to decision): turn_ms - wait_ms is
    # the machine's time.
    wait_ms = models.PositiveIntegerField(null=True, blank=True)
    fallback = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"routing {self.pk}: {self.query[:60]}"

    @property
    def tokens_saved(self) -> int:
        return max(self.catalog_schema_tokens - self.loaded_schema_tokens - self.deferred_listing_tokens, 0)

    @cached_property
    def denied_by_reason(self) -> list[dict]:
        """The denied tools grouped by their reason, the largest group first: [{reason, count, names}]."""
        names_by_reason: dict[str, list[str]] = {}
        for denied in self.denied:
            names_by_reason.setdefault(denied["reason"], []).append(denied["name"])
        groups = [{"reason": reason, "count": len(names), "names": names} for reason, names in names_by_reason.items()]
        return sorted(groups, key=lambda group: (-group["count"], group["reason"]))


class Workflow(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        SUBMITTED = "submitted"
        CANCELLED = "cancelled"
        EXPIRED = "expired"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="workflows")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workflows")
    kind = models.CharField(max_length=64)
    phase = models.CharField(max_length=64)
    state = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    version = models.PositiveIntegerField(default=1)
    expires_at = models.DateTimeField(db_index=True)
    idempotency_key = models.CharField(max_length=200, blank=True, help_text="Empty: no idempotency.")
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="workflow_owner_idempotency_key_unique",
            )
        ]

    def __str__(self):
        return f"{self.kind} workflow {self.pk} at {self.phase} (v{self.version})"


def default_api_key_scopes() -> list[str]:
    return list(ApiKey.DEFAULT_SCOPES)


class ApiKey(models.Model):
    """A key for the API (/v1) and /mcp. Only its hash is stored; the key is shown once.

    It acts with its owner's permissions and only inside its scopes (agents.access.abilities).
    """

    class Scope(models.TextChoices):
        CHAT = "chat", "chat: start turns, decide their approvals, list models (/v1)"
        MCP = "mcp", "mcp: list and call tools (/mcp)"
        READ = "read", "read-only: list models and tools, never start a turn or call a tool"

    DEFAULT_SCOPES = (Scope.CHAT, Scope.MCP)

    name = models.CharField(max_length=100)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(max_length=16, unique=True, help_text="Public part, for lookup.")
    key_hash = models.CharField(max_length=64)
    revoked = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(default=default_api_key_scopes, help_text="What the key may be used for (Scope values).")
    lists_every_permitted_tool = models.BooleanField(
        default=False,
        help_text="/mcp lists every tool policy lets this key call, up to TOOLHUB_MCP_LIST_ALL_TOKENS schema tokens, "
        "for clients that never call tool_search (others: tool_search and what it found).",
    )
    # Set on the key an OAuth client acts as for its user (agents.mcp_gateway.oauth): it has no secret of its own; its
    # access tokens use it. Revoking it cuts the client off; its scopes narrow what the client's tokens may do.
    oauth_application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
        help_text="The OAuth client that acts as this key (set on keys toolhub makes for OAuth clients only).",
    )  # fmt: skip

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "oauth_application"],
                condition=models.Q(oauth_application__isnull=False),
                name="one_key_per_oauth_client_and_user",
            )
        ]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    def clean(self):
        unknown = sorted(set(self.scopes or []) - set(self.Scope.values)) if isinstance(self.scopes, list) else None
        if unknown is None or unknown or not self.scopes:
            raise ValidationError({"scopes": f"Choose one or more of {', '.join(self.Scope.values)}."})


class ToolApproval(models.Model):
    """A risky tool call waiting for a person's decision; the turn is paused meanwhile."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"  # no decision in time: treated as denied
        CANCELLED = "cancelled"  # its turn was cancelled before a decision (agents.turns.cancellation)

    REASON_MAX_LENGTH = 500

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="approvals")
    tool_call_id = models.CharField(max_length=100)
    tool_name = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict)
    risk = models.CharField(max_length=16)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(
        max_length=REASON_MAX_LENGTH, blank=True, help_text="Why it was denied, as the model is told (optional)."
    )

    class Meta:
        ordering = ["-requested_at"]
        permissions = [("decide_toolapproval", "Can approve or deny risky tool calls")]
        constraints = [models.UniqueConstraint(fields=["turn", "tool_call_id"], name="approval_per_call_unique")]

    def __str__(self):
        return f"{self.tool_name} for turn {self.turn_id} ({self.status})"


class ServerQuestion(models.Model):
    """An MCP server's elicitation during a turn's tool call, asked of an operator in the console while the call
    waits (agents.turns.questions). Taken once, as an approval is: only a pending row within its deadline changes."""

    class Status(models.TextChoices):
        PENDING = "pending"
        ANSWERED = "answered"  # the server gets `answer` (its action "accept")
        DECLINED = "declined"  # an operator declined it
        EXPIRED = "expired"  # no answer within the tool call's time: the server is told declined
        CANCELLED = "cancelled"  # its turn was cancelled or ended first: the server is told cancelled

    MESSAGE_MAX_LENGTH = 4000

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="questions")
    message = models.TextField(help_text="The server's message, as it sent it (cut to MESSAGE_MAX_LENGTH).")
    requested_schema = models.JSONField(help_text="The server's form (catalog.mcp_client.callers.elicitation_problem).")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    asked_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    answer = models.JSONField(null=True, blank=True, help_text="The form's content the server got, once answered.")
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-asked_at"]

    def __str__(self):
        return f"question {self.pk} of turn {self.turn_id} ({self.status})"


class McpFoundTool(models.Model):
    """A tool an API key found through tool_search over /mcp (agents.mcp_gateway.found_tools).

    Listed and callable for that key in every MCP session, under the routing
    decision it was found with, until `expires_at` (TOOLHUB_MCP_FOUND_TTL);
    policy is checked again on every list and call.
    """

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="mcp_found_tools")
    tool = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="+")
    decision = models.JSONField(help_text="The RoutingDecision of the search that found it (as_dict).")
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["api_key", "tool"], name="mcp_found_tool_per_key")]
        indexes = [models.Index(fields=["api_key", "expires_at"], name="mcp_found_by_key")]

    def __str__(self):
        return f"{self.tool_id} found by key {self.api_key_id}"


class RetentionDay(models.Model):
    """What retention removed of one day (the day a turn was created), kept so the overview's totals stay right.

    Every batch adds its rows here in the transaction that deletes them (agents/turns/retention.py), so a day's figures
    are exact however many runs it took. Latencies are kept as counts per bucket of LATENCY_BUCKETS_MS (the upper
    bound of each, the last one open), from which the percentiles are read.
    """

    LATENCY_BUCKETS_MS = (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 60000, 120000, 300000)

    day = models.DateField(unique=True)
    turns_done = models.PositiveBigIntegerField(default=0)
    turns_failed = models.PositiveBigIntegerField(default=0)
    turns_cancelled = models.PositiveBigIntegerField(default=0)
    events = models.PositiveBigIntegerField(default=0)
    messages = models.PositiveBigIntegerField(default=0)
    routing_logs = models.PositiveBigIntegerField(default=0)
    fallbacks = models.PositiveBigIntegerField(default=0)
    tokens_saved = models.PositiveBigIntegerField(default=0)
    turn_ms_buckets = models.JSONField(default=list, blank=True, help_text="Turns per latency bucket.")
    steward_ms_buckets = models.JSONField(default=list, blank=True, help_text="Analyses per latency bucket.")

    class Meta:
        ordering = ["-day"]

    def __str__(self):
        return f"retained summary of {self.day}"

    @classmethod
    def bucket_counts(cls, values) -> list[int]:
        """How many of `values` fall in each bucket (a value above the last bound counts in an extra last one)."""
        counts = [0] * (len(cls.LATENCY_BUCKETS_MS) + 1)
        for value in values:
            counts[next((i for i, top in enumerate(cls.LATENCY_BUCKETS_MS) if value <= top), -1)] += 1
        return counts

    @classmethod
    def bucket_percentile(cls, counts: list[int], fraction: float) -> int | None:
        """The upper bound of the bucket holding the nearest-rank percentile; None for no values (the open last
        bucket reads as its lower bound)."""
        total = sum(counts)
        if not total:
            return None
        rank, seen = max(math.ceil(fraction * total), 1), 0
        for index, count in enumerate(counts):
            seen += count
            if seen >= rank:
                return cls.LATENCY_BUCKETS_MS[min(index, len(cls.LATENCY_BUCKETS_MS) - 1)]
        return None

    @property
    def turns(self) -> int:
        return self.turns_done + self.turns_failed + self.turns_cancelled

    @property
    def p50_turn_ms(self):
        return self.bucket_percentile(self.turn_ms_buckets, 0.50)

    @property
    def p95_turn_ms(self):
        return self.bucket_percentile(self.turn_ms_buckets, 0.95)

    @property
    def p50_steward_ms(self):
        return self.bucket_percentile(self.steward_ms_buckets, 0.50)

    @property
    def p95_steward_ms(self):
        return self.bucket_percentile(self.steward_ms_buckets, 0.95)


class MetricsDay(models.Model):
    """/metrics' sum of one closed day's stored rows, so a scrape reads only the open days' rows
    (agents/turns/rollup.py).

    Summed once, when the day ended METRICS_CLOSED_AFTER_DAYS ago: the ended turns created that day by outcome, and
    the routing logs written that day (requests, fallbacks, schema tokens saved, latency buckets as RetentionDay's).
    When retention later removes some of those rows it moves their figures from here to RetentionDay in the same
    transaction, so RetentionDay + MetricsDay + the open days' rows count every row once. A value that changed after
    the day was summed stays as summed (figures may go below zero here, never in the sum).
    """

    day = models.DateField(unique=True)
    turns_done = models.BigIntegerField(default=0)
    turns_failed = models.BigIntegerField(default=0)
    turns_cancelled = models.BigIntegerField(default=0)
    routing_logs = models.BigIntegerField(default=0)
    fallbacks = models.BigIntegerField(default=0)
    tokens_saved = models.BigIntegerField(default=0)
    turn_ms_buckets = models.JSONField(default=list, blank=True)
    steward_ms_buckets = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-day"]

    def __str__(self):
        return f"metrics of {self.day}"


class OverviewHour(models.Model):
    """One closed UTC hour of the overview's breakdown, summed once (agents/console/closed_hours.py): its turns by
    model profile, channel and API key (OverviewHourTurns) and its tool results by tool (OverviewHourTools), so a range
    of days reads these rows and only its open edges row by row. An hour is closed once it ended
    closed_hours.SETTLE ago and every turn created in it has ended; its figures stay as summed (retention removing its
    rows later does not change them)."""

    hour = models.DateTimeField(unique=True, help_text="Its start, UTC.")

    class Meta:
        ordering = ["-hour"]

    def __str__(self):
        return f"overview of {self.hour:%Y-%m-%d %H}:00 UTC"


class OverviewHourTurns(models.Model):
    """The turns created in one closed hour with one model profile, channel and API key name."""

    hour = models.ForeignKey(OverviewHour, on_delete=models.CASCADE, related_name="turn_groups")
    profile = models.ForeignKey(ModelProfile, null=True, blank=True, on_delete=models.SET_NULL)
    channel = models.CharField(max_length=16)
    api_key_name = models.CharField(max_length=100, blank=True)
    turns = models.PositiveIntegerField()
    failed = models.PositiveIntegerField()
    finished = models.PositiveIntegerField(help_text="Turns whose routing log has a duration.")
    machine_ms = models.PositiveBigIntegerField(help_text="Their durations less their approval waits, summed.")
    prompt_tokens = models.PositiveBigIntegerField()
    completion_tokens = models.PositiveBigIntegerField()

    def __str__(self):
        return f"{self.turns} turns of {self.channel} in the hour of {self.hour_id}"


class OverviewHourTools(models.Model):
    """The results of one tool returned in one closed hour."""

    hour = models.ForeignKey(OverviewHour, on_delete=models.CASCADE, related_name="tool_groups")
    tool = models.TextField(help_text="As its results name it (a client tool's name may be any text).")
    calls = models.PositiveIntegerField()
    failed = models.PositiveIntegerField(help_text="Of them, failed or refused.")

    def __str__(self):
        return f"{self.calls} results of {self.tool[:60]} in the hour of {self.hour_id}"


class RetentionRun(models.Model):
    """One run of retention (beat task or `manage.py apply_retention`): its cutoff and what it removed."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    retention_days = models.PositiveIntegerField()
    cutoff = models.DateTimeField(help_text="Rows older than this went.")
    batches = models.PositiveIntegerField(default=0)
    turns = models.PositiveBigIntegerField(default=0)
    events = models.PositiveBigIntegerField(default=0)
    messages = models.PositiveBigIntegerField(default=0)
    routing_logs = models.PositiveBigIntegerField(default=0)
    conversations = models.PositiveBigIntegerField(default=0, help_text="Conversations its deletes left empty.")

    class Meta:
        ordering = ["-started_at"]

    def __str__(self):
        return f"retention run {self.started_at:%Y-%m-%d %H:%M} ({self.turns} turns)"


# Names the tz database lists that name no place: the machine's own zone (it differs between machines) and the
# database's placeholder.
NOT_PLACES = frozenset({"localtime", "Factory"})


@functools.cache
def time_zone_names() -> frozenset[str]:
    """The zone names a user may choose (zoneinfo's, read once per process)."""
    return frozenset(zoneinfo.available_timezones() - NOT_PLACES)


def validate_time_zone(value: str) -> None:
    if value not in time_zone_names():
        raise ValidationError("Not a time zone name (e.g. Europe/Paris, Asia/Ho_Chi_Minh, UTC).")


class UserPreference(models.Model):
    """A signed-in user's own settings (their account page): today the zone the pages show times in."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        validators=[validate_time_zone],
        help_text="An IANA zone name; empty: the browser's zone, else TOOLHUB_TIME_ZONE.",
    )

    def __str__(self):
        return f"{self.user} prefers {self.time_zone or 'the browser zone'}"
