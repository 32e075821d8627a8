"""`make run`'s path on a fresh data dir: setup_demo, then Daphne; log in and see the catalog."""

import http.cookiejar
import re
import time
import urllib.parse
import urllib.request

import pytest

from tests.support.servers import daphne, embedded_env, manage

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory):
    """Run exactly what `make run` runs, with nothing configured but a fresh data dir."""
    env = embedded_env(tmp_path_factory.mktemp("embedded"))
    setup = manage(env, "setup_demo")
    login = re.search(r"username: (\S+)\n\s+password: (\S+)", setup)
    assert login, setup
    with daphne(env) as base:
        yield {"base": base, "username": login[1], "password": login[2], "setup": setup}


def test_setup_prints_a_login_and_loads_the_demo_catalog(embedded_server):
    assert "Log in at http://127.0.0.1:8000/login/" in embedded_server["setup"]
    assert re.search(r"Demo catalog: (\d+) tools", embedded_server["setup"])


def logged_in(embedded_server):
    base = embedded_server["base"]
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    login_page = browser.open(f"{base}/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page)[1]
    form = {"username": embedded_server["username"], "password": embedded_server["password"],
            "csrfmiddlewaretoken": token}  # fmt: skip
    browser.open(urllib.request.Request(f"{base}/login/", data=urllib.parse.urlencode(form).encode(),
                                        headers={"Referer": f"{base}/login/"}))  # fmt: skip
    return browser


def test_a_console_conversation_in_the_embedded_default_runs_its_turn_in_the_background(embedded_server):
    """Eager Celery here: the console's POST answers with the conversation, and the turn still runs to its end
    (in a thread of the Daphne process, agents.turns.dispatch.start_in_background)."""
    base = embedded_server["base"]
    browser = logged_in(embedded_server)
    console = browser.open(f"{base}/console/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', console)[1]
    form = {"message": "What is 15 + 27?", "model": "toolhub", "csrfmiddlewaretoken": token}
    started = time.monotonic()
    landed = browser.open(urllib.request.Request(f"{base}/console/", data=urllib.parse.urlencode(form).encode(),
                                                 headers={"Referer": f"{base}/console/"}))  # fmt: skip
    print(f"console POST to the conversation page: {1000 * (time.monotonic() - started):.0f} ms")
    assert re.fullmatch(rf"{base}/console/\d+/", landed.url), landed.url
    for _ in range(120):
        page = browser.open(landed.url).read().decode()
        if "status-done" in page:
            break
        time.sleep(0.5)
    assert "status-done" in page and "15 + 27 = 42" in page


def test_login_page_then_catalog_after_login(embedded_server):
    base = embedded_server["base"]
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    anonymous = browser.open(f"{base}/catalog/")
    assert anonymous.url == f"{base}/login/?next=/catalog/"
    login_page = browser.open(f"{base}/login/").read().decode()
    assert "Log in to toolhub" in login_page
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page)[1]
    form = {"username": embedded_server["username"], "password": embedded_server["password"]}
    form |= {"csrfmiddlewaretoken": token, "next": "/catalog/"}
    request = urllib.request.Request(
        f"{base}/login/", data=urllib.parse.urlencode(form).encode(), headers={"Referer": f"{base}/login/"}
    )
    catalog = browser.open(request)
    assert catalog.url == f"{base}/catalog/"
    page = catalog.read().decode()
    for name in ("calculate", "get_current_time", "web_search", "create_rule", "list_campaigns"):
        assert f">{name}</a>" in page
    assert "Needs policy" in page and "export_member_data" in page
    assert "builtin (offline, rule-based)" in page
    css = browser.open(f"{base}/static/css/toolhub.css")
    assert css.status == 200
