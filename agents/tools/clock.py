"""Current time and date in a time zone or city for the clock tools; never guesses a zone it does not recognise.

A zone is an IANA name (`Asia/Ho_Chi_Minh`, any case), a city from
`CITY_ZONES` (`Hanoi`, `ho chi minh city`, `Hà Nội`), or a city that is the
last part of IANA names that agree (`Kolkata` -> `Asia/Kolkata`). Nothing
given means UTC. The zone database is the system's (/usr/share/zoneinfo) or,
where the system has none, the `tzdata` package.
"""

from __future__ import annotations

import unicodedata
import zoneinfo
from datetime import UTC, datetime, timedelta, tzinfo
from functools import cache

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

# Lower-case, accent-free city names and common abbreviations -> IANA zone.
CITY_ZONES = {
    "utc": "UTC",
    "gmt": "UTC",
    "paris": "Europe/Paris",
    "london": "Europe/London",
    "berlin": "Europe/Berlin",
    "tokyo": "Asia/Tokyo",
    "hanoi": "Asia/Ho_Chi_Minh",
    "ha noi": "Asia/Ho_Chi_Minh",
    "ho chi minh city": "Asia/Ho_Chi_Minh",
    "ho chi minh": "Asia/Ho_Chi_Minh",
    "hcmc": "Asia/Ho_Chi_Minh",
    "saigon": "Asia/Ho_Chi_Minh",
    "sai gon": "Asia/Ho_Chi_Minh",
    "vietnam": "Asia/Ho_Chi_Minh",
    "singapore": "Asia/Singapore",
    "sydney": "Australia/Sydney",
    "new york": "America/New_York",
    "new york city": "America/New_York",
    "nyc": "America/New_York",
    "san francisco": "America/Los_Angeles",
    "los angeles": "America/Los_Angeles",
    "la": "America/Los_Angeles",
}


class UnknownTimezone(ValueError):
    """The time zone or city is not recognised; the message names it."""


def get_current_time(timezone: str | None = None, *, now: datetime | None = None) -> dict:
    """The local time in `timezone` (UTC when empty) at `now` (the current instant when None)."""
    name, local = _local_now(timezone, now)
    return {
        "timezone": name,
        "iso_time": local.isoformat(timespec="seconds"),
        "local_time": f"{local:%H:%M:%S}",
        "date": local.date().isoformat(),
        "weekday": WEEKDAYS[local.weekday()],
        "utc_offset": _format_offset(local.utcoffset()),
        "abbreviation": local.tzname() or "",
    }


def get_current_date(timezone: str | None = None, *, now: datetime | None = None) -> dict:
    """Today's date in `timezone` (UTC when empty) at `now` (the current instant when None)."""
    name, local = _local_now(timezone, now)
    return {
        "timezone": name,
        "date": local.date().isoformat(),
        "weekday": WEEKDAYS[local.weekday()],
        "long_date": f"{WEEKDAYS[local.weekday()]}, {local.day} {MONTHS[local.month - 1]} {local.year}",
        "utc_offset": _format_offset(local.utcoffset()),
    }


def resolve_timezone(timezone: str | None) -> tuple[str, tzinfo]:
    """(IANA name, tzinfo) for a zone name or city; raises UnknownTimezone."""
    text = (timezone or "").strip()
    if not text:
        return "UTC", _utc()
    key = _city_key(text)
    if key in CITY_ZONES:
        return _zone(CITY_ZONES[key])
    by_lower = _zones_by_lower_name()
    if text.lower() in by_lower:
        return _zone(by_lower[text.lower()])
    city_matches = _zones_by_city().get(key.replace(" ", "_"), ())
    if city_matches and _agree(city_matches):
        return _zone(city_matches[0])
    raise UnknownTimezone(
        f"Unknown time zone or city: {text!r}. Use an IANA name such as Europe/Paris or Asia/Ho_Chi_Minh, "
        "or a city such as Tokyo or Hanoi."
    )


def _local_now(timezone: str | None, now: datetime | None) -> tuple[str, datetime]:
    name, zone = resolve_timezone(timezone)
    instant = now or datetime.now(UTC)
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    return name, instant.astimezone(zone)


def _city_key(text: str) -> str:
    """Lower case, accents removed (Hà Nội -> ha noi), underscores and runs of spaces as one space."""
    decomposed = unicodedata.normalize("NFKD", text.replace("đ", "d").replace("Đ", "D"))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(plain.lower().replace("_", " ").split())


def _format_offset(offset: timedelta | None) -> str:
    minutes = round((offset or timedelta()).total_seconds() / 60)
    sign = "-" if minutes < 0 else "+"
    hours, minutes = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{minutes:02d}"


def _zone(name: str) -> tuple[str, tzinfo]:
    if name == "UTC":
        return "UTC", _utc()
    try:
        return name, zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise UnknownTimezone(f"The time zone {name!r} is missing from this server's zone database.") from None


def _agree(names: tuple[str, ...]) -> bool:
    """Whether zones sharing a city name are aliases (same offsets in winter and summer), e.g. Buenos_Aires."""
    probes = (datetime(2025, 1, 15, tzinfo=UTC), datetime(2025, 7, 15, tzinfo=UTC))
    offsets = {tuple(probe.astimezone(zoneinfo.ZoneInfo(name)).utcoffset() for probe in probes) for name in names}
    return len(offsets) == 1


def _utc() -> tzinfo:
    return UTC  # needs no zone database, so UTC always works


@cache
def _zones_by_lower_name() -> dict[str, str]:
    return {name.lower(): name for name in zoneinfo.available_timezones()}


@cache
def _zones_by_city() -> dict[str, tuple[str, ...]]:
    """Last part of each Area/City zone name, lower case -> the zones that end with it."""
    cities: dict[str, list[str]] = {}
    for name in zoneinfo.available_timezones():
        area, _, city = name.rpartition("/")
        if area and not name.startswith("Etc/"):
            cities.setdefault(city.lower(), []).append(name)
    return {city: tuple(sorted(names)) for city, names in cities.items()}
