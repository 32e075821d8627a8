"""Shared test setup: integration tests fail loudly (never skip) without the real services."""

import pytest
from django.conf import settings


@pytest.fixture(autouse=True)
def _integration_needs_real_services(request):
    if request.node.get_closest_marker("integration") is None:
        return
    missing = []
    if not settings.DATABASE_URL.startswith(("postgres://", "postgresql://")):
        missing.append("DATABASE_URL=postgres://...")
    if not settings.REDIS_URL:
        missing.append("REDIS_URL=redis://...")
    if missing:
        pytest.fail(
            "integration test needs the real services: set " + " and ".join(missing) + " (make test does this)",
            pytrace=False,
        )
