"""Dashboard forms of the catalog; validation of what they store lives in the logic modules they call."""

from django import forms

from .models import ToolExample


class ToolExampleForm(forms.Form):
    """An operator's example (add) or an edit of any example: its text and whether it is approved."""

    text = forms.CharField(
        max_length=ToolExample.MAX_TEXT_CHARS,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "A request a user would write for this tool"}),
        help_text=f"At most {ToolExample.MAX_TEXT_CHARS:,} characters.",
    )
    approved = forms.BooleanField(required=False, initial=True, help_text="Approved examples help search rank it.")
