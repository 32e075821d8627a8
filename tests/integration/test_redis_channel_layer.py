"""The scaled channel layer: messages cross processes through the real Redis."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

SEND = """
import sys, django
django.setup()
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
async_to_sync(get_channel_layer().group_send)(sys.argv[1], {"type": "turn.event", "text": "from another process"})
"""


@pytest.mark.asyncio
async def test_group_message_from_another_process_arrives_through_redis():
    layer = get_channel_layer()
    assert isinstance(layer, RedisChannelLayer)
    group = f"itest-{uuid.uuid4().hex}"
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        env = os.environ | {"DJANGO_SETTINGS_MODULE": "toolhub.settings"}
        result = subprocess.run(
            [sys.executable, "-c", SEND, group], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        message = await layer.receive(channel)
        assert message == {"type": "turn.event", "text": "from another process"}
    finally:
        await layer.group_discard(group, channel)
