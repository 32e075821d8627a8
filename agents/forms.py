"""Forms of the conversation pages: console chat, routing-log and workflow filters. Validation only, never writes."""

from django import forms
from django.db.models import Q, QuerySet

from catalog.models import Action

from .models import ApiKey, ModelProfile, RoutingLog, Workflow
from .providers import upstream_of

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


class CancelWorkflowForm(forms.Form):
    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


class ApiKeyForm(forms.ModelForm):
    """The admin's form for an existing key: its name, its scopes (checkboxes), revoked."""

    scopes = forms.MultipleChoiceField(choices=ApiKey.Scope.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ApiKey
        fields = ("name", "scopes", "revoked")
