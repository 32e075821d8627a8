"""A snippet's review interval is bounded: a number past the calendar is the form's error, never a 500."""

import datetime

import pytest
from django.utils import timezone

from catalog.models import Domain, KnowledgeSnippet
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("days,saved", [("3650", True), ("3651", False), ("99999999999", False), ("0", False)])
def test_the_review_interval_is_at_most_ten_years(client, days, saved):
    domain = Domain.objects.create(name="loyalty", title="Loyalty")
    KnowledgeSnippet.objects.create(domain=domain, action="answer", title="Points expire", text="Old.", source="s",
                                    owner="team", last_reviewed=timezone.localdate() - datetime.timedelta(days=1),
                                    review_interval_days=30)  # fmt: skip
    client.force_login(make_user("op", role="operator"))
    data = {"title": "Points expire", "text": "New.", "source": "s", "owner": "team", "action": "answer",
            "review_interval_days": days}  # fmt: skip
    response = client.post("/knowledge/points-expire/", data)
    if saved:
        assert response.status_code == 302
    else:  # the page again with the field's error, nothing saved
        assert response.status_code == 200 and "review_interval_days" in response.content.decode()
        assert KnowledgeSnippet.objects.get(key="points-expire").text == "Old."
