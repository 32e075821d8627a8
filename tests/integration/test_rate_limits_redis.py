"""Rate limit counts on the scaled path: one count in Redis, shared by every process."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from toolhub import rate_limits

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

TAKE = """
import sys, django
django.setup()
from toolhub import rate_limits
print(rate_limits.take(sys.argv[1], limit=2, what="API key", now=float(sys.argv[2])))
"""


def test_another_process_counts_in_the_same_window_through_redis():
    cache = settings.CACHES["default"]
    assert cache["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    bucket, now = f"itest-{uuid.uuid4().hex}", time.time()
    assert rate_limits.take(bucket, limit=2, what="API key", now=now) is None
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "toolhub.settings", "TOOLHUB_CHANNEL_PREFIX": cache["KEY_PREFIX"]}
    other = subprocess.run([sys.executable, "-c", TAKE, bucket, repr(now)], env=env, cwd=ROOT, capture_output=True,
                           text=True, check=True, timeout=60)  # fmt: skip
    assert other.stdout.strip().splitlines()[-1] == "None"  # the second request of two
    assert rate_limits.take(bucket, limit=2, what="API key", now=now) is not None  # the third, whoever makes it
