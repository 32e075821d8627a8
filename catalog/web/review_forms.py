"""Forms of the policy review queue: the bulk decision (accept or reject, one note) and each row's edit of its
proposal (operation, risk, domains). They validate only; catalog.policies.review writes."""

import unicodedata

from django import forms

from catalog.models import Operation, PolicyVersion, Risk

from .forms import CommaListField

NOTE_MAX_LENGTH = PolicyVersion._meta.get_field("note").max_length  # the note is kept with every version it makes
DOMAINS_MAX_LENGTH = 500
NO_SELECTION = "Select at least one tool, or tick “All tools awaiting review”."
GONE = "A tool you selected no longer awaits review (someone decided it, or it waits for a second operator): reload."
QUEUE_CHANGED = "The queue changed since you opened it: reload and check it again. Nothing was saved."


def one_line(text: str, what: str) -> str:
    if any(unicodedata.category(char) == "Cc" for char in text):
        raise forms.ValidationError(f"{what} is one line of text, without control characters.")
    return text


class ReviewDecisionForm(forms.Form):
    """Accept or reject the selected tools (or every tool of the queue, as it was shown) with one note."""

    decision = forms.ChoiceField(
        choices=[("accept", "Accept"), ("reject", "Reject")],
        error_messages={"required": "Choose accept or reject.", "invalid_choice": "Choose accept or reject."},
    )
    note = forms.CharField(
        max_length=NOTE_MAX_LENGTH,
        strip=True,
        help_text=f"Why: kept with every version this makes (one line, at most {NOTE_MAX_LENGTH} characters).",
        error_messages={"required": "A note is required: say why (it is kept with every version)."},
    )
    tools = forms.TypedMultipleChoiceField(coerce=int, required=False, error_messages={"invalid_choice": GONE})
    everything = forms.BooleanField(required=False)
    queue = forms.CharField(required=False, widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args, decidable: list[int], fingerprint: str, **kwargs):
        super().__init__(*args, **kwargs)
        tools = self.fields["tools"]
        assert isinstance(tools, forms.TypedMultipleChoiceField)
        tools.choices = [(pk, pk) for pk in decidable]
        self.fingerprint = fingerprint

    def clean_note(self) -> str:
        return one_line(self.cleaned_data["note"], "The note")

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if cleaned.get("everything"):
            if cleaned.get("queue") != self.fingerprint:
                raise forms.ValidationError(QUEUE_CHANGED)
        elif not cleaned.get("tools"):
            raise forms.ValidationError(NO_SELECTION)
        return cleaned


class DomainListField(CommaListField):
    """Domain names typed as "a, b"; each must exist."""

    def __init__(self, *args, known: frozenset[str] = frozenset(), **kwargs):
        super().__init__(*args, max_length=DOMAINS_MAX_LENGTH, **kwargs)
        self.known = known

    def validate(self, value):
        super().validate(value)
        if unknown := [name for name in value if name not in self.known]:
            shown = ", ".join(name[:40] for name in unknown[:5])
            raise forms.ValidationError(f"No such domain: {shown}.")


class ReviewRowForm(forms.Form):
    """One row's proposal as the operator leaves it; `base_version` is the policy version it was proposed against."""

    operation = forms.ChoiceField(choices=Operation.choices)
    risk = forms.ChoiceField(choices=Risk.choices)
    domains = DomainListField(required=False)
    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    def __init__(self, *args, domains: frozenset[str], **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["domains"]
        assert isinstance(field, DomainListField)
        field.known = domains
