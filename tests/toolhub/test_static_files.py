"""Static files outside production: served by WhiteNoise from the finders, cached by the browser for a minute."""

import pytest
from django.test import override_settings


@pytest.mark.django_db
@override_settings(DEBUG=True)  # as `make run` serves them (WhiteNoise reads DEBUG as the client's handler starts)
def test_a_static_file_is_reused_for_a_minute_before_the_browser_asks_again(client):
    # WhiteNoise's default under DEBUG is max-age=0: every page asked for its render-blocking stylesheet again.
    response = client.get("/static/css/toolhub.css")
    assert response.status_code == 200 and response["Cache-Control"] == "max-age=60, public"
