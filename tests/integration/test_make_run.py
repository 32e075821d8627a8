"""`make run`'s path on a fresh data dir: setup_demo, then Daphne; log in and see the catalog."""

import http.cookiejar
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EMBEDDED_UNSET = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "TOOLHUB_MODEL_BASE_URL", "SECRET_KEY", "DEBUG")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory):
    """Run exactly what `make run` runs, with nothing configured but a fresh data dir."""
    data_dir = tmp_path_factory.mktemp("embedded")
    env = {k: v for k, v in os.environ.items() if k not in EMBEDDED_UNSET} | {"TOOLHUB_DATA_DIR": str(data_dir)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    setup = subprocess.run(
        [sys.executable, "manage.py", "setup_demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    login = re.search(r"username: (\S+)\n\s+password: (\S+)", setup.stdout)
    assert login, setup.stdout
    port = free_port()
    daphne = Path(sys.executable).parent / "daphne"
    server = subprocess.Popen(
        [str(daphne), "-b", "127.0.0.1", "-p", str(port), "toolhub.asgi:application"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "daphne did not listen within 60 s"
                time.sleep(0.3)
        yield {"base": f"http://127.0.0.1:{port}", "username": login[1], "password": login[2], "setup": setup.stdout}
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_setup_prints_a_login_and_loads_the_demo_catalog(embedded_server):
    assert "Log in at http://127.0.0.1:8000/login/" in embedded_server["setup"]
    assert re.search(r"Demo catalog: (\d+) tools", embedded_server["setup"])


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
