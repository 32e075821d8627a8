"""Forms of the conversation pages: console chat, an approval's decision, turn search, a tool's activity, routing-log
and workflow filters. Validation only, never writes."""

import unicodedata

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from agents.models import ApiKey, Conversation, ModelProfile, RoutingLog, ToolApproval, Turn, Workflow
from agents.providers import upstream_of
from catalog.models import Action

from .metrics import DEFAULT_QUALITY_WINDOW, QUALITY_WINDOWS, MetricsWindow
from .turn_search import TurnFilters

DEFAULT_MODEL = "toolhub"


class ChatForm(forms.Form):
    message = forms.CharField(max_length=4000, strip=True, widget=forms.Textarea(attrs={"rows": 2}))
    model = forms.ChoiceField(required=False, help_text="A model profile sets the model it calls and its token budget.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        profiles = ModelProfile.objects.only("name", "upstream_model", "base_url")
        self.fields["model"].choices = [(DEFAULT_MODEL, "default profile"),
                                        *((p.name, f"{p.name}: {upstream_of(p).label}") for p in profiles)]  # fmt: skip

    def model_profile(self) -> ModelProfile | None:
        name = self.cleaned_data.get("model") or DEFAULT_MODEL
        return None if name == DEFAULT_MODEL else ModelProfile.objects.get(name=name)


class DecisionForm(forms.Form):
    """Approve or deny a risky call; a denial may say why (stored, shown on its card and told to the model)."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("deny", "Deny")],
                                 error_messages={"required": "Choose approve or deny.",
                                                 "invalid_choice": "Choose approve or deny."})  # fmt: skip
    reason = forms.CharField(required=False, max_length=ToolApproval.REASON_MAX_LENGTH, strip=True)

    def clean_reason(self):
        reason = self.cleaned_data["reason"]
        if any(unicodedata.category(char) == "Cc" for char in reason):
            raise forms.ValidationError("A reason is one line of text, without control characters.")
        return reason

    def first_error(self) -> str:
        return str(next(iter(message for messages in self.errors.values() for message in messages), ""))


YES_NO = [("", "any"), ("yes", "yes"), ("no", "no")]


class RoutingFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Query contains")
    action = forms.ChoiceField(required=False, choices=[("", "any"), *Action.choices])
    domain = forms.SlugField(required=False)
    fallback = forms.ChoiceField(required=False, choices=YES_NO)
    mode = forms.ChoiceField(required=False, label="Steward", choices=[("", "any"), ("rules", "rules"),
                             ("llm", "llm"), ("hybrid", "hybrid")])  # fmt: skip
    tool = forms.CharField(required=False, label="Tool (loaded or denied)")

    def filter(self, logs: QuerySet[RoutingLog]) -> QuerySet[RoutingLog]:
        """The logs matching the valid filters (an invalid one is ignored and shown with its error)."""
        data = self.cleaned_data if self.is_valid() else {}
        if data.get("q"):
            logs = logs.filter(query__icontains=data["q"])
        if data.get("action"):
            logs = logs.filter(decision__action=data["action"])
        if data.get("domain"):
            # JSON arrays compare as text on both SQLite and PostgreSQL: match the quoted name.
            logs = logs.filter(decision__domains__icontains=f'"{data["domain"]}"')
        if data.get("fallback"):
            logs = logs.filter(fallback=data["fallback"] == "yes")
        if data.get("mode"):
            logs = logs.filter(steward_mode=data["mode"])
        if data.get("tool"):
            quoted = f'"{data["tool"]}"'
            logs = logs.filter(Q(exposed__icontains=quoted) | Q(denied__icontains=quoted))
        return logs


class WorkflowFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any"), *Workflow.Status.choices])
    kind = forms.CharField(required=False)
    owner = forms.CharField(required=False, label="Owner (username)")

    def filter(self, workflows: QuerySet[Workflow]) -> QuerySet[Workflow]:
        data = self.cleaned_data if self.is_valid() else {}
        if data.get("status"):
            workflows = workflows.filter(status=data["status"])
        if data.get("kind"):
            workflows = workflows.filter(kind__icontains=data["kind"])
        if data.get("owner"):
            workflows = workflows.filter(owner__username__iexact=data["owner"])
        return workflows


class DateInput(forms.DateInput):
    input_type = "date"  # the browser's date picker; the value is YYYY-MM-DD either way


class TurnSearchForm(forms.Form):
    """The search's filters, from the query string (a shareable URL); a bad value is an error beside its field."""

    q = forms.CharField(required=False, max_length=200, label="Text",
                        help_text="In the request, the answer, tool results or the routed query.")  # fmt: skip
    tool = forms.CharField(required=False, max_length=64, label="Tool called")
    status = forms.ChoiceField(required=False, choices=[("", "any"), *Turn.Status.choices])
    owner = forms.CharField(required=False, max_length=150, label="Owner (username)",
                            help_text="Who started it: the operator, or the API key's user.")  # fmt: skip
    channel = forms.ChoiceField(required=False, label="Channel", choices=[("", "any"), *Conversation.Channel.choices])
    api_key = forms.CharField(required=False, max_length=100, label="API key (name)")
    end_user = forms.CharField(required=False, max_length=256, label="End user",
                               help_text="The user an API request named (its user field).")  # fmt: skip
    tag = forms.CharField(required=False, max_length=600, label="Tag (key=value)",
                          help_text="A metadata pair an API request carried.")  # fmt: skip
    since = forms.DateField(required=False, label="From", widget=DateInput, help_text="YYYY-MM-DD")
    until = forms.DateField(required=False, label="To", widget=DateInput, help_text="YYYY-MM-DD, inclusive")

    def clean_owner(self) -> str:
        owner = self.cleaned_data["owner"].strip()
        field = get_user_model().USERNAME_FIELD
        if owner and not get_user_model().objects.filter(**{f"{field}__iexact": owner}).exists():
            raise forms.ValidationError(f"No user is named {owner}.")
        return owner

    def clean_tag(self) -> tuple[str, str] | None:
        tag = self.cleaned_data["tag"].strip()
        if not tag:
            return None
        key, equals, value = tag.partition("=")
        if not equals or not key.strip():
            raise forms.ValidationError("Write a tag as key=value, as the request's metadata had it.")
        return key.strip(), value.strip()

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "The end comes before the start.")
        return data

    def filters(self) -> TurnFilters:
        """The valid form's filters (call is_valid first)."""
        data = self.cleaned_data
        return TurnFilters(text=data["q"].strip(), tool=data["tool"].strip(), status=data["status"],
                           owner=data["owner"], channel=data["channel"], api_key=data["api_key"].strip(),
                           end_user=data["end_user"].strip(), tag=data["tag"], since=data["since"],
                           until=data["until"])  # fmt: skip


class ToolActivityForm(forms.Form):
    window = forms.ChoiceField(required=False, label="Period",
                               choices=[(w.key, w.label) for w in QUALITY_WINDOWS])  # fmt: skip

    def period(self) -> MetricsWindow:
        """The chosen window (the default, 24 hours, when none is given); call is_valid first."""
        key = self.cleaned_data.get("window") or DEFAULT_QUALITY_WINDOW.key
        return next(window for window in QUALITY_WINDOWS if window.key == key)


class CancelWorkflowForm(forms.Form):
    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


class ApiKeyForm(forms.ModelForm):
    """The admin's form for an existing key: its name, its scopes (checkboxes), revoked."""

    scopes = forms.MultipleChoiceField(choices=ApiKey.Scope.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ApiKey
        fields = ("name", "scopes", "revoked")
