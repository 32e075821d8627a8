"""Times in the viewer's zone: their saved zone wins over their browser's (the toolhub_tz cookie), which wins over
TOOLHUB_TIME_ZONE; a name that is no zone is ignored (cookie) or refused (form); /account/ saves a signed-in user's
own choice; turns keep reading the clock in the server's zone."""

import datetime

import pytest
from django.utils import timezone

from agents import tasks
from agents.account.zones import COOKIE, save_time_zone
from agents.models import Conversation, Turn, UserPreference
from agents.turns.start import create_turn
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db
# 03:04:05 UTC on 15 January: 12:04:05 in Tokyo (JST), 22:04:05 the day before in New York (EST).
MOMENT = datetime.datetime(2026, 1, 15, 3, 4, 5, tzinfo=datetime.UTC)


@pytest.fixture
def viewer(client):
    user = make_user("viewer", role="viewer")
    client.force_login(user)
    return user


def zone_of(client) -> str:
    return client.get("/account/").wsgi_request.time_zone.name


def test_the_saved_zone_wins_over_the_browsers(client, viewer):
    save_time_zone(user=viewer, name="Asia/Tokyo")
    client.cookies[COOKIE] = "America/New_York"
    response = client.get("/account/")
    assert response.wsgi_request.time_zone.name == "Asia/Tokyo"
    assert "Asia/Tokyo (JST)" in response.content.decode()  # the header names the zone and its abbreviation


def test_the_browsers_zone_wins_over_the_servers(client, viewer, settings):
    settings.TIME_ZONE = "Europe/Paris"
    assert zone_of(client) == "Europe/Paris"
    client.cookies[COOKIE] = "America/New_York"
    page = client.get("/account/").content.decode()
    assert "<strong>America/New_York</strong>" in page and "your browser's zone" in page


@pytest.mark.parametrize("cookie", ["Mars/Olympus_Mons", "localtime", "../../etc/passwd", "", "x" * 300])
def test_a_cookie_that_names_no_zone_is_ignored(client, viewer, cookie):
    client.cookies[COOKIE] = cookie
    assert zone_of(client) == "UTC"


def test_an_anonymous_visitor_gets_the_browsers_zone_on_the_login_page(client):
    client.cookies[COOKIE] = "Asia/Tokyo"
    assert client.get("/login/").wsgi_request.time_zone.name == "Asia/Tokyo"


def test_the_account_page_needs_a_login(client):
    assert client.get("/account/").url == "/login/?next=/account/"
    response = client.post("/account/", {"time_zone": "Asia/Tokyo"})
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert not UserPreference.objects.exists()


def test_a_user_without_a_role_sets_their_own_zone(client, django_user_model):
    nobody = django_user_model.objects.create_user("nobody", password="a-long-test-password")
    client.force_login(nobody)
    response = client.post("/account/", {"time_zone": "Asia/Tokyo"}, follow=True)
    assert response.redirect_chain == [("/account/", 302)]
    assert "Saved: pages show times in Asia/Tokyo." in response.content.decode()
    assert UserPreference.objects.get(user=nobody).time_zone == "Asia/Tokyo"
    assert response.wsgi_request.time_zone.name == "Asia/Tokyo"


def test_the_page_offers_to_follow_the_browser_first_and_marks_the_saved_choice(client, viewer):
    client.cookies[COOKIE] = "Europe/Paris"
    page = client.get("/account/").content.decode()
    assert '<label for="id_time_zone">Show times in</label>' in page
    assert '<option value="" selected>Follow my browser (currently: Europe/Paris)</option>' in page
    assert '<optgroup label="Asia">' in page and 'aria-describedby="id_time_zone_helptext"' in page
    save_time_zone(user=viewer, name="Asia/Tokyo")
    assert '<option value="Asia/Tokyo" selected>' in client.get("/account/").content.decode()


def test_a_name_that_is_no_zone_is_the_forms_error(client, viewer):
    save_time_zone(user=viewer, name="Asia/Tokyo")
    response = client.post("/account/", {"time_zone": "Mars/Olympus_Mons"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert UserPreference.objects.get(user=viewer).time_zone == "Asia/Tokyo"  # unchanged


def test_following_the_browser_again_clears_the_saved_zone(client, viewer):
    save_time_zone(user=viewer, name="Asia/Tokyo")
    client.cookies[COOKIE] = "Europe/Paris"
    response = client.post("/account/", {"time_zone": ""}, follow=True)
    assert "your browser&#x27;s zone" in response.content.decode()
    assert UserPreference.objects.get(user=viewer).time_zone == ""
    assert response.wsgi_request.time_zone.name == "Europe/Paris"


def test_saving_refuses_a_name_that_is_no_zone():
    user = make_user("someone", role="viewer")
    with pytest.raises(ValueError):
        save_time_zone(user=user, name="Europe/Atlantis")
    assert not UserPreference.objects.exists()


def conversation_at_moment(owner) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title="What is 15 + 27?")
    turn = create_turn(conversation, "What is 15 + 27?")
    Turn.objects.filter(pk=turn.pk).update(created_at=MOMENT)
    return conversation


def test_a_conversation_shows_its_turns_time_in_the_viewers_zone(client, viewer):
    conversation = conversation_at_moment(viewer)
    url = f"/console/{conversation.pk}/"
    assert "2026-01-15 03:04:05 UTC" in client.get(url).content.decode()
    client.cookies[COOKIE] = "America/New_York"
    assert "2026-01-14 22:04:05 EST" in client.get(url).content.decode()
    save_time_zone(user=viewer, name="Asia/Tokyo")
    assert "2026-01-15 12:04:05 JST" in client.get(url).content.decode()


def test_the_console_list_says_how_long_ago_with_the_time_in_the_viewers_zone(client, viewer):
    conversation_at_moment(viewer)
    save_time_zone(user=viewer, name="Asia/Tokyo")
    page = client.get("/console/").content.decode()
    assert '<time datetime="2026-01-15T12:04:05+09:00" title="2026-01-15 12:04:05 JST" data-relative>' in page
    assert " ago</time>" in page


def test_the_overview_labels_its_charts_with_the_viewers_zone(client, viewer):
    client.cookies[COOKIE] = "Asia/Ho_Chi_Minh"
    page = client.get("/").content.decode()
    assert "minute (Asia/Ho_Chi_Minh)" in page and "Asia/Ho_Chi_Minh (+07)" in page


def test_a_turn_reads_the_clock_in_the_servers_zone_whoever_started_it(monkeypatch, settings):
    settings.TIME_ZONE = "Europe/Paris"
    seen = []
    monkeypatch.setattr(tasks.runtime, "run_turn", lambda turn_id: seen.append(timezone.get_current_timezone_name()))
    with timezone.override("Asia/Tokyo"):  # eager Celery runs a resumed turn inside the deciding operator's request
        tasks.run_turn(0)
        assert timezone.get_current_timezone_name() == "Asia/Tokyo"
    assert seen == ["Europe/Paris"]
