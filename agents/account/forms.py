"""The account page's form: the zone to show times in, or none to follow the browser."""

from typing import cast

from django import forms

from .zones import grouped_choices, is_zone

FOLLOW_BROWSER = ""


class TimeZoneForm(forms.Form):
    time_zone = forms.ChoiceField(
        label="Show times in",
        required=False,
        help_text="Every page, and the live console, prints times in this zone with its abbreviation.",
    )

    def __init__(self, *args, browser_zone: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        current = browser_zone if is_zone(browser_zone) else "not told yet"
        field = cast(forms.ChoiceField, self.fields["time_zone"])
        field.choices = [(FOLLOW_BROWSER, f"Follow my browser (currently: {current})"), *grouped_choices()]
