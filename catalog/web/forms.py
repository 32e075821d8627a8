"""Dashboard forms for policies, knowledge and tool examples: parse and validate input; never save anything.

Saving goes through catalog.policies.versions (new PolicyVersion) and catalog.knowledge.registry
(new snippet version), so every write path keeps the same history rules.
"""

import unicodedata

from django import forms

from catalog.knowledge.registry import BULK_LIMIT, REVISABLE
from catalog.knowledge.selectors import DUE_SOON_DAYS
from catalog.models import (
    READ_ONLY_OPERATIONS,
    Domain,
    KnowledgeSnippet,
    Operation,
    Risk,
    Tool,
    ToolExample,
    ToolPolicy,
)
from catalog.policies.bundle import HIGH_RISKS
from catalog.policies.versions import snapshot

MAX_REPLAY = 200


class CommaListField(forms.CharField):
    """A list of short strings typed as "a, b, c"."""

    def to_python(self, value):
        text = super().to_python(value)
        return list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list | tuple) else value


def routing_warning(draft: dict) -> str:
    """Why routing would never offer a tool under this policy, though it saves: an active write (create, update,
    delete, execute) policy outside any workflow and with no domain matches no request (a write request is
    matched to tools by its domains: catalog.policies.bundle.denial_reason). "" when there is nothing to warn of."""
    if draft["status"] != ToolPolicy.Status.ACTIVE or draft["operation"] in READ_ONLY_OPERATIONS:
        return ""
    if draft["workflow_phases"] or draft["domains"]:
        return ""
    return (
        f"This {draft['operation']} policy has no domain: routing never offers the tool, since a "
        f"{draft['operation']} request reaches only the tools of its domains. Add a domain (or a workflow phase)."
    )


class AlwaysLoadForm(forms.Form):
    """Whether a tool's schema is always loaded into the model's prompt (never deferred behind tool_search)."""

    always_load = forms.BooleanField(required=False)


class PolicyForm(forms.Form):
    """A draft of a tool's policy. `note` is required to save, not to simulate."""

    status = forms.ChoiceField(
        choices=ToolPolicy.Status.choices, help_text="Only an active policy lets routing offer the tool; draft and "
        "denied refuse it everywhere."
    )  # fmt: skip
    operation = forms.ChoiceField(choices=Operation.choices)
    risk = forms.ChoiceField(choices=Risk.choices)
    domains = forms.ModelMultipleChoiceField(
        queryset=Domain.objects.all(), to_field_name="name", required=False, widget=forms.CheckboxSelectMultiple
    )
    workflow_phases = CommaListField(required=False, help_text="Comma-separated; empty: not a workflow tool.")
    aliases = CommaListField(required=False, help_text="Comma-separated words users say for this tool.")
    requires_confirmation = forms.BooleanField(required=False, help_text="Every call waits for an approval.")
    note = forms.CharField(max_length=500, help_text="Why this change (kept with the version).")
    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    replay = forms.IntegerField(
        min_value=1, max_value=MAX_REPLAY, initial=20, required=False, label="Requests to replay"
    )

    def __init__(self, *args, policy: ToolPolicy | None = None, for_simulation: bool = False, **kwargs):
        self.current = snapshot(policy) if policy is not None else None
        if policy is not None and "initial" not in kwargs:
            kwargs["initial"] = self.current | {"base_version": policy.version}
        elif "initial" not in kwargs:
            kwargs["initial"] = {"status": ToolPolicy.Status.DRAFT, "risk": Risk.LOW, "base_version": 0}
        super().__init__(*args, **kwargs)
        self.for_simulation = for_simulation
        if for_simulation:
            self.fields["note"].required = False

    def clean_requires_confirmation(self):
        confirm = self.cleaned_data["requires_confirmation"]
        risk = self.cleaned_data.get("risk")
        if risk in HIGH_RISKS and not confirm and self.cleaned_data.get("status") == ToolPolicy.Status.ACTIVE:
            raise forms.ValidationError(
                f"An active {risk}-risk tool must require confirmation (otherwise every request denies it)."
            )
        return confirm

    def clean(self):
        cleaned = super().clean()
        if not self.for_simulation and not self.errors and self.current is not None and self.draft() == self.current:
            raise forms.ValidationError("Nothing changed: a new version needs a change.")
        return cleaned

    def draft(self) -> dict:
        """The policy as this form would save it (the snapshot shape of catalog.policies.versions)."""
        data = self.cleaned_data
        return {
            "status": data["status"],
            "operation": data["operation"],
            "risk": data["risk"],
            "workflow_phases": data["workflow_phases"],
            "aliases": data["aliases"],
            "requires_confirmation": data["requires_confirmation"],
            "domains": sorted(domain.name for domain in data["domains"]),
        }


class SnippetForm(forms.ModelForm):
    """The revisable fields of a knowledge snippet; saving makes a new version (catalog.knowledge.registry)."""

    class Meta:
        model = KnowledgeSnippet
        fields = REVISABLE
        # The owner is typed or picked from users and existing owners (the page's datalist, selectors.owner_choices).
        widgets = {"text": forms.Textarea(attrs={"rows": 8}), "owner": forms.TextInput(attrs={"list": "owner-choices"})}

    # Ten years at most: a review date past the calendar's end was a 500 (the fuzz test found it).
    review_interval_days = forms.IntegerField(min_value=1, max_value=3650, help_text="Days between reviews.")

    def changes(self) -> dict:
        return {name: self.cleaned_data[name] for name in self.changed_data if name in REVISABLE}

    def clean(self):
        cleaned = super().clean()
        if not self.errors and not self.changes():
            raise forms.ValidationError("Nothing changed: a new version needs a change.")
        return cleaned

    def _post_clean(self):
        # Validate fields only: the instance is the current version and must stay untouched.
        pass


class SnippetFilterForm(forms.Form):
    """Query-string filters of the knowledge pages (deep-linkable)."""

    SHOW_CHOICES = (("stale", "review queue"), ("soon", f"due within {DUE_SOON_DAYS} days"), ("all", "all snippets"))

    show = forms.ChoiceField(choices=SHOW_CHOICES, required=False)
    owner = forms.CharField(required=False, max_length=200)
    domain = forms.ModelChoiceField(
        queryset=Domain.objects.all(), to_field_name="name", required=False, empty_label="any"
    )


class BulkSnippetForm(forms.Form):
    """A bulk action on the knowledge list's chosen snippets: mark them reviewed, or give them a new owner."""

    ACTIONS = (("review", "Mark reviewed"), ("reassign", "Reassign"))

    keys = forms.MultipleChoiceField(choices=(), error_messages={"required": "Choose at least one snippet."})
    action = forms.ChoiceField(choices=ACTIONS)
    owner = forms.CharField(required=False, max_length=KnowledgeSnippet._meta.get_field("owner").max_length)

    def __init__(self, *args, current_keys, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["keys"].choices = [(key, key) for key in current_keys]

    def clean_keys(self):
        keys = self.cleaned_data["keys"]
        if len(keys) > BULK_LIMIT:
            raise forms.ValidationError(f"At most {BULK_LIMIT} snippets at once ({len(keys)} chosen).")
        return keys

    def clean(self):
        cleaned = super().clean()
        owner = cleaned.get("owner", "")
        if any(unicodedata.category(char) == "Cc" for char in owner):
            self.add_error("owner", "An owner is one line of text, without control characters.")
        elif cleaned.get("action") == "reassign" and not owner:
            self.add_error("owner", "Reassigning needs the new owner.")
        return cleaned


class ToolFilterForm(forms.Form):
    """Query-string filters of the catalog and policy lists (deep-linkable); invalid values are ignored."""

    POLICY_CHOICES = (("", "any"), *ToolPolicy.Status.choices, ("none", "none"))
    DEFERRED_CHOICES = (("", "any"), ("yes", "deferred"), ("no", "loaded"))
    SORT_CHOICES = (("name", "name"), ("-tokens", "most tokens"), ("tokens", "fewest tokens"), ("source", "source"))

    q = forms.CharField(required=False, max_length=200, label="Search")
    domain = forms.ModelChoiceField(
        queryset=Domain.objects.all(), to_field_name="name", required=False, empty_label="any"
    )
    source = forms.ChoiceField(choices=(("", "any"), *Tool.Source.choices), required=False)
    risk = forms.ChoiceField(choices=(("", "any"), *Risk.choices), required=False)
    deferred = forms.ChoiceField(choices=DEFERRED_CHOICES, required=False, label="Loading")
    policy = forms.ChoiceField(choices=POLICY_CHOICES, required=False)
    sort = forms.ChoiceField(choices=SORT_CHOICES, required=False)

    def filters(self) -> dict:
        """Keyword arguments for selectors.search_tools; a field with an invalid value counts as unset."""
        data = {}
        if self.is_bound:
            self.is_valid()  # cleaned_data then holds the valid fields only
            data = self.cleaned_data
        domain = data.get("domain")
        return {
            "query": (data.get("q") or "").strip(),
            "source": data.get("source") or "",
            "policy_status": data.get("policy") or "",
            "domain": domain.name if domain else "",
            "risk": data.get("risk") or "",
            "deferred": {"yes": True, "no": False}.get(data.get("deferred") or ""),
            "sort": data.get("sort") or "name",
        }


class ToolExampleForm(forms.Form):
    """An operator's example (add) or an edit of any example: its text and whether it is approved."""

    text = forms.CharField(
        max_length=ToolExample.MAX_TEXT_CHARS,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "A request a user would write for this tool"}),
        help_text=f"At most {ToolExample.MAX_TEXT_CHARS:,} characters.",
    )
    approved = forms.BooleanField(required=False, initial=True, help_text="Approved examples help search rank it.")
