"""Which time zone a viewer's pages show times in: their saved choice, else their browser's (the `toolhub_tz`
cookie static/js/time.js sets), else the server's (TOOLHUB_TIME_ZONE); and saving a user's own choice. Never
trusts a name it did not find in the tz database.
"""

from dataclasses import dataclass

from django.conf import settings

from agents.models import UserPreference, time_zone_names

COOKIE = "toolhub_tz"  # static/js/time.js writes it; the name of the browser's zone, e.g. Asia/Ho_Chi_Minh


class Source:
    """Where the active zone came from (the account page says it)."""

    SAVED = "saved"
    BROWSER = "browser"
    SERVER = "server"


@dataclass(frozen=True)
class ActiveZone:
    name: str
    source: str


def is_zone(name: str) -> bool:
    return name in time_zone_names()


def choose(*, saved: str, browser: str) -> ActiveZone:
    """The saved zone wins over the browser's, which wins over the server's; a name that is no zone is skipped."""
    if saved and is_zone(saved):
        return ActiveZone(saved, Source.SAVED)
    if browser and is_zone(browser):
        return ActiveZone(browser, Source.BROWSER)
    return ActiveZone(settings.TIME_ZONE, Source.SERVER)


def saved_zone(user) -> str:
    """The user's saved zone ("" for none, or for anonymous): one query for a signed-in user."""
    if user is None or not user.is_authenticated:
        return ""
    return UserPreference.objects.filter(user_id=user.pk).values_list("time_zone", flat=True).first() or ""


def zone_for(user, cookies) -> ActiveZone:
    """The zone of a request or a WebSocket (their user and their cookies)."""
    return choose(saved=saved_zone(user), browser=cookies.get(COOKIE, ""))


def grouped_choices() -> list[tuple[str, list[tuple[str, str]]]]:
    """Every zone name, grouped by its area (Africa, America, …; "Other" for names without one), sorted."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for name in sorted(time_zone_names()):
        area, _, place = name.partition("/")
        groups.setdefault(area if place else "Other", []).append((name, name))
    return sorted(groups.items(), key=lambda group: (group[0] == "Other", group[0]))


def save_time_zone(*, user, name: str) -> None:
    """The user's own choice ("" follows the browser); a name that is no zone is refused before it is stored."""
    if name and not is_zone(name):
        raise ValueError(f"{name!r} is not a time zone name")
    UserPreference.objects.update_or_create(user=user, defaults={"time_zone": name})
