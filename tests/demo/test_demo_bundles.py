"""On the demo catalog a typical request loads at most 10% of the whole catalog's schema tokens."""

import pytest

from catalog.policies.bundle import build_bundle
from catalog.policies.decision import RoutingDecision, load_catalog

TYPICAL = [
    ("answer", {"general"}, ["calculate"]),
    ("answer", {"general"}, ["get_current_time"]),
    ("list", {"loyalty", "campaigns"}, ["list_campaigns"]),
    ("get", {"loyalty", "members"}, ["get_member", "get_member_balance"]),
    ("create", {"loyalty", "rewards"}, ["create_voucher"]),
    ("update", {"loyalty", "campaigns"}, ["update_campaign", "get_campaign"]),
    ("execute", {"infrastructure"}, ["restart_container", "inspect_container"]),
    ("answer", set(), []),
]


@pytest.mark.django_db
@pytest.mark.parametrize("action,domains,recommended", TYPICAL)
def test_typical_request_loads_at_most_a_tenth_of_the_catalog(action, domains, recommended, demo_catalog, settings):
    decision = RoutingDecision(action, frozenset(domains), settings.TOOLHUB_MIN_CONFIDENCE)
    bundle = build_bundle(decision, load_catalog(), recommended=recommended)
    assert set(recommended) <= set(bundle.loaded_names)
    assert "purge_container_images" not in bundle.searchable_names()
    assert "export_member_data" not in bundle.searchable_names()
    assert bundle.loaded_schema_tokens <= 0.10 * bundle.catalog_schema_tokens, (
        bundle.loaded_schema_tokens,
        bundle.catalog_schema_tokens,
    )
