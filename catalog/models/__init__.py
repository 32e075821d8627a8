"""Catalog data: tools, their policies (versioned), domains and knowledge snippets.

Invariants that belong to one row live here (schema validity, derived
token counts and hashes, immutability of policy versions). Decisions about
what a model may see live in bundle.py, never in the models.
"""

import datetime
import hashlib
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.text import slugify

from .schemas import (
    MAX_MCP_PREFIX_LENGTH,
    default_mcp_prefix,
    validate_input_schema,
    validate_mcp_prefix,
    validate_string_list,
    validate_tool_name,
)
from .secrets import EncryptedJSONField
from .tokens import canonical_json, count_tokens


class Action(models.TextChoices):
    """What a request wants to do; the RoutingDecision and knowledge use it."""

    ANSWER = "answer"
    LIST = "list"
    GET = "get"
    SEARCH = "search"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    EXECUTE = "execute"


class Operation(models.TextChoices):
    """What a tool does when called."""

    READ = "read"
    LIST = "list"
    SEARCH = "search"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    EXECUTE = "execute"


READ_ONLY_OPERATIONS = frozenset({Operation.READ, Operation.LIST, Operation.SEARCH})
WRITE_OPERATIONS = frozenset({Operation.CREATE, Operation.UPDATE, Operation.DELETE})


class Risk(models.TextChoices):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Domain(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    aliases = models.JSONField(
        default=list, blank=True, validators=[validate_string_list], help_text="Words users say for this domain."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Tool(models.Model):
    class Source(models.TextChoices):
        BUILTIN = "builtin"
        MCP = "mcp"
        IMPORT = "import"

    name = models.CharField(max_length=64, unique=True, validators=[validate_tool_name])
    description = models.TextField()
    input_schema = models.JSONField(validators=[validate_input_schema], help_text="JSON Schema of type object.")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.BUILTIN)
    is_mcp = models.BooleanField(default=False)
    always_load = models.BooleanField(default=False)
    should_defer = models.BooleanField(default=False)
    schema_tokens = models.PositiveIntegerField(default=0, editable=False)
    schema_hash = models.CharField(max_length=64, editable=False, db_index=True)
    enabled = models.BooleanField(default=True)
    # What an MCP server lists beside the schema, kept as it sent it so toolhub's /mcp lists it unchanged.
    upstream_name = models.CharField(
        max_length=128, blank=True, help_text="MCP tools: the name its server calls it by (catalog.mcp_client.names)."
    )
    title = models.CharField(max_length=300, blank=True, help_text="MCP tools: the display title.")
    output_schema = models.JSONField(null=True, blank=True, help_text="MCP tools: JSON Schema of structuredContent.")
    annotations = models.JSONField(null=True, blank=True, help_text="MCP tools: behaviour hints (readOnlyHint, ...).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Never store an invalid schema, whichever path saves the row.
        validate_tool_name(self.name)
        validate_input_schema(self.input_schema)
        serialized = canonical_json(self.function_definition())
        digest = hashlib.sha256(serialized.encode()).hexdigest()
        if digest != self.schema_hash or not self.schema_tokens:
            self.schema_hash = digest
            self.schema_tokens = count_tokens(serialized)
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "schema_hash", "schema_tokens"}
        super().save(*args, **kwargs)

    def function_definition(self) -> dict:
        """The definition a model receives (OpenAI tools format)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }

    @property
    def server_name(self) -> str:
        """The name toolhub calls this tool by on its MCP server."""
        return self.upstream_name or self.name


class ToolPolicy(models.Model):
    """The current policy of a tool; `version` points at its active PolicyVersion."""

    class Status(models.TextChoices):
        # Only an active policy lets its tool be offered; people read "rejected" as "denied" (the stored value stays).
        DRAFT = "draft", "draft"
        ACTIVE = "active", "active"
        REJECTED = "rejected", "denied"

    tool = models.OneToOneField(Tool, on_delete=models.CASCADE, related_name="policy")
    domains = models.ManyToManyField(Domain, related_name="policies", blank=True)
    operation = models.CharField(max_length=16, choices=Operation.choices)
    risk = models.CharField(max_length=16, choices=Risk.choices, default=Risk.LOW)
    workflow_phases = models.JSONField(
        default=list, blank=True, validators=[validate_string_list], help_text="Workflow phases this tool serves."
    )
    aliases = models.JSONField(default=list, blank=True, validators=[validate_string_list])
    requires_confirmation = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    version = models.PositiveIntegerField(default=0, help_text="Number of the active PolicyVersion (0: none yet).")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "tool policies"

    def __str__(self):
        return f"policy of {self.tool.name} v{self.version} ({self.status})"


class PolicyVersion(models.Model):
    """An immutable snapshot of a ToolPolicy; rollback moves the policy's pointer."""

    policy = models.ForeignKey(ToolPolicy, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    snapshot = models.JSONField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["policy", "-number"]
        constraints = [models.UniqueConstraint(fields=["policy", "number"], name="policy_version_number_unique")]

    def __str__(self):
        return f"{self.policy.tool.name} v{self.number}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValidationError("Policy versions are immutable; save a new version instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError("Policy versions are immutable and cannot be deleted.")


class PolicyRollback(models.Model):
    """A rollback of a tool's policy: who moved the active pointer from one version back to another, and when.

    Versions stay immutable; the history shows these beside them (catalog.policies.versions.rollback_policy).
    """

    policy = models.ForeignKey(ToolPolicy, on_delete=models.CASCADE, related_name="rollbacks")
    from_version = models.PositiveIntegerField()
    to_version = models.PositiveIntegerField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.policy.tool.name}: v{self.from_version} → v{self.to_version}"


class PolicyChangeRequest(models.Model):
    """A policy change that loosens a tool under four eyes, waiting for a second operator (catalog.policies.four_eyes).

    It holds the draft as the editor would save it; approving it saves that draft as a new PolicyVersion, rejecting
    it leaves the policy as it is. Either way the row stays, with who asked and who decided, and when.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPLIED = "applied"
        REJECTED = "rejected"

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="policy_change_requests")
    draft = models.JSONField(help_text="The policy as it would be saved (catalog.policies.versions snapshot shape).")
    base_version = models.PositiveIntegerField(help_text="The active version the change was made against.")
    reasons = models.JSONField(default=list, help_text="Why it needs a second operator.")
    note = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(null=True, blank=True, help_text="The PolicyVersion it became, if applied.")

    class Meta:
        ordering = ["-requested_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tool"], condition=models.Q(status="pending"), name="one_pending_policy_change_per_tool"
            )
        ]

    def __str__(self):
        return f"change of {self.tool.name}'s policy ({self.status})"


class KnowledgeSnippet(models.Model):
    """One version of a piece of domain knowledge. Versions of one snippet share a `key`;
    editing adds a version (old ones are kept), reviewing stamps the current one."""

    key = models.SlugField(max_length=120, default="", help_text="Identifies the snippet across its versions.")
    domain = models.ForeignKey(Domain, on_delete=models.PROTECT, related_name="snippets")
    action = models.CharField(max_length=16, choices=Action.choices)
    title = models.CharField(max_length=200)
    text = models.TextField()
    source = models.CharField(max_length=300, help_text="Where this knowledge comes from (document, page, URL).")
    owner = models.CharField(max_length=200, help_text="Who keeps it true (person or team).")
    last_reviewed = models.DateField()
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    review_interval_days = models.PositiveIntegerField(default=90)
    # The owner changed: the new owner is asked to review it (in the review queue until they do); a reassignment
    # is not a review.
    review_requested = models.BooleanField(default=False)
    version = models.PositiveIntegerField(default=1)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["domain__name", "title", "-version"]
        constraints = [models.UniqueConstraint(fields=["key", "version"], name="knowledge_key_version_unique")]

    def __str__(self):
        return f"{self.title} v{self.version}"

    def save(self, *args, **kwargs):
        if not self.key:
            self.key = slugify(self.title)[:120]
        super().save(*args, **kwargs)

    @property
    def review_due(self) -> datetime.date:
        return self.last_reviewed + datetime.timedelta(days=self.review_interval_days)

    def is_stale(self, today: datetime.date | None = None) -> bool:
        return (today or timezone.localdate()) > self.review_due


class ToolEmbedding(models.Model):
    """A tool's dense vector by one model, kept so a restart does not embed the whole catalog again.

    One row per tool and model: tool search and the router may use different models.
    """

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="embeddings")
    model_name = models.CharField(max_length=200)
    text_hash = models.CharField(max_length=64, help_text="sha256 of the embedded text.")
    vector = models.BinaryField(help_text="float32 values, little-endian.")
    dim = models.PositiveIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tool", "model_name"], name="tool_embedding_per_model")]

    def __str__(self):
        return f"embedding of {self.tool_id} ({self.model_name}, {self.dim})"


class TextEmbedding(models.Model):
    """A text's vector by one model, found by their hash: a text embedded once is never embedded
    again by any process (examples at start-up, the router's forms of them). catalog.search.vectors reads
    and writes these; rows of texts no longer used are harmless and small."""

    key = models.CharField(max_length=64, unique=True, help_text="sha256 of the model's full name and the text.")
    vector = models.BinaryField(help_text="float32 values, little-endian.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"text embedding {self.key[:12]}"


class CatalogState(models.Model):
    """One row: `version` goes up (in the database) whenever a tool, policy or domain changes, or anything else a
    process reads once per catalog state (catalog.search.signals says what: an MCP server's settings among them).

    `stamp` is new random text on every bump: a rolled-back transaction can make a
    version number come round twice, a stamp never does (the search index keys on both).
    """

    SINGLETON_ID = 1

    version = models.PositiveBigIntegerField(default=0)
    stamp = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        verbose_name = "catalog state"

    def __str__(self):
        return f"catalog version {self.version}"


class McpServer(models.Model):
    """An MCP server toolhub connects to. Sync keeps `tool_names` (what it serves now) and
    `missing_tool_names` (what it stopped serving; those tools are disabled, never deleted).
    The sync_* fields are the latest sync's progress and outcome, for the page that follows it."""

    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio"
        STREAMABLE_HTTP = "streamable_http", "streamable HTTP"

    class OAuth(models.TextChoices):
        """Whose account toolhub uses on a server that needs OAuth (catalog.mcp_oauth)."""

        OFF = "", "off (headers only)"
        SERVICE_BROWSER = "service_browser", "one account for toolhub, an admin signs in"
        SERVICE_CLIENT_CREDENTIALS = "service_client_credentials", "one account for toolhub, client credentials"
        PER_USER = "per_user", "each user signs in with their own account"

    class Status(models.TextChoices):
        NEVER = "never", "never synced"
        OK = "ok", "OK"
        ERROR = "error", "error"

    class ConnectionScope(models.TextChoices):
        """Who shares a connection to the server (catalog.mcp_client.client): one process (and its state) each."""

        SHARED = "shared", "shared: one connection per toolhub process, for every caller"
        PER_USER = "per_user", "per user: each user's own connection (and, for stdio, process and directory)"
        PER_SESSION = "per_session", "per session: one per /mcp session or conversation, closed when idle"

    class SyncPhase(models.TextChoices):
        """Where the latest sync is; the running phases are RUNNING_SYNC_PHASES."""

        IDLE = "idle"
        QUEUED = "queued", "queued, waiting for a worker"
        CONNECTING = "connecting"
        LISTING = "listing", "listing tools"
        IMPORTING = "importing"
        DONE = "done"
        ERROR = "error"

    name = models.SlugField(max_length=64, unique=True)
    prefix = models.CharField(
        max_length=32,
        unique=True,
        blank=True,
        validators=[validate_mcp_prefix],
        help_text="Put before a tool's name (prefix__name) when another tool already has that name. "
        "Empty: derived from the server's name. Changing it renames the prefixed tools; their policies follow.",
    )
    transport = models.CharField(max_length=32, choices=Transport.choices, default=Transport.STDIO)
    command = models.CharField(max_length=500, blank=True, help_text="stdio: the program to start.")
    args = models.JSONField(default=list, blank=True, help_text="stdio: its arguments, a list of strings.")
    env = EncryptedJSONField(
        default=dict, blank=True, help_text="stdio: extra environment variables, an object of strings (encrypted)."
    )
    url = models.URLField(max_length=500, blank=True, help_text="streamable HTTP: the endpoint, e.g. https://host/mcp.")
    headers = EncryptedJSONField(
        default=dict, blank=True, help_text="streamable HTTP: request headers, an object (encrypted)."
    )
    connection_scope = models.CharField(
        max_length=16,
        choices=ConnectionScope.choices,
        default=ConnectionScope.PER_USER,
        help_text="Servers that keep state for their caller (a memory, a browser, a login) need per user or per "
        "session; stateless ones can be shared. In a per-user or per-session stdio server's arguments and "
        "environment, {home} is that connection's own directory.",
    )
    oauth = models.CharField(
        "OAuth",
        max_length=32,
        choices=OAuth.choices,
        default=OAuth.OFF,
        blank=True,
        help_text="streamable HTTP: how toolhub signs in to a server that needs OAuth; connect it on its page.",
    )
    oauth_client_id = models.CharField(
        "OAuth client id",
        max_length=500,
        blank=True,
        help_text="A client registered for toolhub on the server's authorization server. Empty: toolhub registers "
        "itself (dynamic client registration).",
    )
    oauth_client_secret = EncryptedJSONField(
        "OAuth client secret", default="", blank=True, help_text="That client's secret, if it has one (encrypted)."
    )
    oauth_scope = models.CharField(
        "OAuth scopes",
        max_length=500,
        blank=True,
        help_text="Scopes to ask for, space-separated. Empty: what the server asks for.",
    )
    oauth_client = EncryptedJSONField(
        default=dict, blank=True, editable=False, help_text="The client toolhub registered itself as (encrypted)."
    )
    enabled = models.BooleanField(default=True)
    tool_names = models.JSONField(default=list, blank=True, editable=False)
    missing_tool_names = models.JSONField(
        default=list, blank=True, editable=False, help_text="Tools it served before and no longer does (disabled)."
    )
    last_synced_at = models.DateTimeField(null=True, blank=True, editable=False, help_text="Last sync attempt.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.NEVER, editable=False)
    status_message = models.TextField(blank=True, editable=False)
    sync_phase = models.CharField(max_length=16, choices=SyncPhase.choices, default=SyncPhase.IDLE, editable=False)
    sync_done = models.PositiveIntegerField(default=0, editable=False, help_text="Tools imported so far.")
    sync_total = models.PositiveIntegerField(default=0, editable=False, help_text="Tools the server listed.")
    sync_report = models.JSONField(
        default=dict, blank=True, editable=False, help_text="Latest sync: names new, changed, disabled, rejected."
    )
    sync_updated_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self):
        return self.name

    def save(self, *args, **kwargs):
        if not self.prefix:
            self.prefix = self.free_prefix()
        super().save(*args, **kwargs)

    def free_prefix(self) -> str:
        """The prefix derived from the name, numbered when another server has it already."""
        base = default_mcp_prefix(self.name)
        taken = set(McpServer.objects.exclude(pk=self.pk).values_list("prefix", flat=True))
        candidate, number = base, 2
        while candidate in taken:
            suffix = f"_{number}"
            candidate, number = f"{base[: MAX_MCP_PREFIX_LENGTH - len(suffix)]}{suffix}", number + 1
        return candidate

    @property
    def syncing(self) -> bool:
        return self.sync_phase in RUNNING_SYNC_PHASES

    def clean(self):
        errors = {}
        if self.transport == self.Transport.STDIO and not self.command.strip():
            errors["command"] = "A stdio server needs a command to start."
        if self.transport == self.Transport.STREAMABLE_HTTP and not self.url:
            errors["url"] = "A streamable HTTP server needs a URL."
        if not isinstance(self.args, list) or not all(isinstance(arg, str) for arg in self.args):
            errors["args"] = "Expected a list of strings."
        for field in ("env", "headers"):
            value = getattr(self, field)
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                errors[field] = "Expected an object whose values are strings."
        if self.oauth and self.transport != self.Transport.STREAMABLE_HTTP:
            errors["oauth"] = "OAuth is for streamable HTTP servers."
        if self.oauth == self.OAuth.SERVICE_CLIENT_CREDENTIALS and not (
            self.oauth_client_id and self.oauth_client_secret
        ):
            errors["oauth_client_id"] = "Client credentials need a client id and its secret."
        if self.oauth == self.OAuth.PER_USER and self.connection_scope != self.ConnectionScope.PER_USER:
            errors["connection_scope"] = "Each user's own OAuth account needs a connection per user."
        if errors:
            raise ValidationError(errors)


RUNNING_SYNC_PHASES = frozenset(
    {
        McpServer.SyncPhase.QUEUED,
        McpServer.SyncPhase.CONNECTING,
        McpServer.SyncPhase.LISTING,
        McpServer.SyncPhase.IMPORTING,
    }
)


class ToolExample(models.Model):
    """A request a tool served (learned from a good turn, written by an operator, or imported).

    Approved examples help search rank their tool (catalog.search.index); they never
    change what policy allows. `turn_id` / `conversation_id` are plain numbers: the
    catalog does not know the agents app. One row per tool and normalised text.
    """

    MAX_TEXT_CHARS = 1000

    class Source(models.TextChoices):
        OPERATOR = "operator"
        LEARNED = "learned"
        IMPORTED = "imported"

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="examples")
    text = models.CharField(max_length=MAX_TEXT_CHARS)
    text_key = models.CharField(max_length=64, editable=False, help_text="sha256 of the normalised text.")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.OPERATOR)
    approved = models.BooleanField(default=False)
    seen_count = models.PositiveIntegerField(default=1, help_text="Times this request (or a near copy) was seen.")
    turn_id = models.PositiveBigIntegerField(null=True, blank=True, help_text="The turn it was learned from.")
    conversation_id = models.PositiveBigIntegerField(null=True, blank=True, db_index=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tool_examples",
        help_text="Whose traffic it came from (none: shared).",
    )
    model_name = models.CharField(max_length=200, blank=True)
    vector = models.BinaryField(null=True, blank=True, help_text="float32 values, little-endian.")
    dim = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tool", "-approved", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["tool", "text_key"], name="tool_example_text_unique")]

    def __str__(self):
        return f"{self.tool_id}: {self.text[:60]}"


from .oauth import McpOAuthGrant  # noqa: E402, F401  (it refers to McpServer, defined above)
