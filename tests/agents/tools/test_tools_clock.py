"""The clock tools answer for IANA zones and common cities, default to UTC, and name what they do not recognise."""

from datetime import UTC, datetime

import pytest

from agents.tools import BUILTIN_TOOL_NAMES, run_builtin
from agents.tools.clock import UnknownTimezone, get_current_date, get_current_time, resolve_timezone

WINTER = datetime(2025, 1, 14, 20, 30, 5, tzinfo=UTC)  # a Tuesday
SUMMER = datetime(2025, 7, 14, 12, 0, 0, tzinfo=UTC)


def test_time_in_hanoi_is_utc_plus_seven():
    answer = get_current_time("Hanoi", now=WINTER)
    assert answer == {
        "timezone": "Asia/Ho_Chi_Minh",
        "iso_time": "2025-01-15T03:30:05+07:00",
        "local_time": "03:30:05",
        "date": "2025-01-15",
        "weekday": "Wednesday",
        "utc_offset": "+07:00",
        "abbreviation": "+07",
    }


def test_missing_or_empty_timezone_means_utc():
    for missing in (None, "", "   "):
        answer = get_current_time(missing, now=WINTER)
        assert answer["timezone"] == "UTC"
        assert answer["iso_time"] == "2025-01-14T20:30:05+00:00"
        assert answer["utc_offset"] == "+00:00"


@pytest.mark.parametrize(
    ("name", "zone"),
    [
        ("Paris", "Europe/Paris"),
        ("tokyo", "Asia/Tokyo"),
        ("LONDON", "Europe/London"),
        ("New York", "America/New_York"),
        ("Ho Chi Minh City", "Asia/Ho_Chi_Minh"),
        ("Saigon", "Asia/Ho_Chi_Minh"),
        ("Hà Nội", "Asia/Ho_Chi_Minh"),
        ("Singapore", "Asia/Singapore"),
        ("Sydney", "Australia/Sydney"),
        ("Berlin", "Europe/Berlin"),
        ("San Francisco", "America/Los_Angeles"),
        ("Los Angeles", "America/Los_Angeles"),
        ("utc", "UTC"),
        ("asia/ho_chi_minh", "Asia/Ho_Chi_Minh"),
        ("America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"),
        ("Kolkata", "Asia/Kolkata"),
    ],
)
def test_cities_and_zone_names_resolve_case_insensitively(name, zone):
    assert resolve_timezone(name)[0] == zone


def test_utc_offset_follows_daylight_saving_time():
    assert get_current_time("New York", now=WINTER)["utc_offset"] == "-05:00"
    assert get_current_time("New York", now=SUMMER)["utc_offset"] == "-04:00"
    assert get_current_time("Asia/Kathmandu", now=SUMMER)["utc_offset"] == "+05:45"


def test_date_is_the_local_date_with_its_weekday():
    assert get_current_date("Tokyo", now=WINTER) == {
        "timezone": "Asia/Tokyo",
        "date": "2025-01-15",
        "weekday": "Wednesday",
        "long_date": "Wednesday, 15 January 2025",
        "utc_offset": "+09:00",
    }
    assert get_current_date("Los Angeles", now=WINTER)["date"] == "2025-01-14"


def test_naive_now_is_taken_as_utc():
    assert get_current_time("Paris", now=datetime(2025, 1, 14, 12, 0))["local_time"] == "13:00:00"


@pytest.mark.parametrize("name", ["Narnia", "../etc/passwd", "posix/Asia/Tokyo", "Europe/"])
def test_unknown_zone_is_refused_with_its_name(name):
    with pytest.raises(UnknownTimezone) as refused:
        resolve_timezone(name)
    assert repr(name) in str(refused.value)


def test_clock_tools_through_run_builtin():
    assert {"get_current_time", "get_current_date"} <= BUILTIN_TOOL_NAMES
    time = run_builtin("get_current_time", {"timezone": "Tokyo"}, emit=_no_status)
    assert time.is_error is False and time.content["timezone"] == "Asia/Tokyo"
    date = run_builtin("get_current_date", {}, emit=_no_status)
    assert date.is_error is False and date.content["timezone"] == "UTC"
    unknown = run_builtin("get_current_date", {"timezone": "Atlantis"}, emit=_no_status)
    assert unknown.is_error is True and "'Atlantis'" in unknown.content


def _no_status(phase, message, **data):
    raise AssertionError("the clock sends no status")
