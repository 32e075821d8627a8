"""/metrics' turn queue: messages waiting in the broker's queue and toolhub_broker_up, read through kombu; a broker
that is down, refuses or never answers gives broker_up 0 and the scrape still answers 200 with every other figure."""

import os
import socket
import threading
import uuid

import pytest
from django.test import override_settings
from kombu import Connection, Exchange, Producer, Queue

from agents.observability import broker
from tests.agents.observability.test_metrics import SCRAPE, TOKEN, family, scrape

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_kept_connection():
    """Each test starts and ends without the connection a scrape keeps for the next."""
    broker._drop()
    yield
    broker._drop()


def publish(url: str, queue: str, count: int) -> None:
    target = Queue(queue, Exchange(queue, type="direct"), routing_key=queue)
    with Connection(url) as connection:
        producer = Producer(connection.default_channel)
        for i in range(count):
            producer.publish({"i": i}, exchange=target.exchange, routing_key=queue, declare=[target], serializer="json")


def purge(url: str, queue: str) -> None:
    """Remove the queue, its messages and (Redis) its binding: declared on this channel first, which kombu's Redis
    transport needs to know what to delete."""
    with Connection(url) as connection:
        bound = Queue(queue, Exchange(queue, type="direct"), routing_key=queue).bind(connection.default_channel)
        bound.declare()
        bound.delete()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def on_broker(url: str, queue: str = "turns"):
    return override_settings(TOOLHUB_METRICS_TOKEN=TOKEN, CELERY_TASK_ALWAYS_EAGER=False, CELERY_BROKER_URL=url,
                             CELERY_TASK_DEFAULT_QUEUE=queue)  # fmt: skip


@override_settings(TOOLHUB_METRICS_TOKEN=TOKEN)
def test_no_broker_figures_while_turns_run_in_process(client):
    figures = scrape(client)  # the embedded default: CELERY_TASK_ALWAYS_EAGER, no broker

    assert not family(figures, "toolhub_broker_up")
    assert not family(figures, "toolhub_celery_queue_messages")


def test_the_messages_waiting_in_the_turn_queue(client):
    queue = f"turns-{uuid.uuid4().hex}"
    publish("memory://", queue, 3)
    try:
        with on_broker("memory://", queue):
            figures = scrape(client)
            publish("memory://", queue, 2)
            again = scrape(client)  # through the connection the first scrape kept
    finally:
        purge("memory://", queue)

    assert figures[("toolhub_broker_up", ())] == 1
    assert figures[("toolhub_celery_queue_messages", (("queue", queue),))] == 3
    assert again[("toolhub_celery_queue_messages", (("queue", queue),))] == 5


def test_a_queue_the_broker_does_not_know_has_nothing_waiting(client):
    with on_broker("memory://", f"never-declared-{uuid.uuid4().hex}"):
        figures = scrape(client)

    assert figures[("toolhub_broker_up", ())] == 1
    assert list(family(figures, "toolhub_celery_queue_messages").values()) == [0]


@pytest.mark.parametrize("scheme", ["redis", "amqp"])
def test_a_broker_that_refuses_gives_broker_up_0_and_the_other_figures(client, scheme):
    with on_broker(f"{scheme}://127.0.0.1:{closed_port()}/0"):
        figures = scrape(client)  # scrape() asserts the 200

    assert figures[("toolhub_broker_up", ())] == 0
    assert not family(figures, "toolhub_celery_queue_messages")
    assert figures[("toolhub_turns_total", (("outcome", "done"),))] == 0


def test_a_broker_that_never_answers_holds_a_scrape_only_for_the_timeout(client, monkeypatch):
    monkeypatch.setattr(broker, "BROKER_TIMEOUT", 0.2)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does) and never says a word
    answers = []
    with on_broker(f"redis://127.0.0.1:{silent.getsockname()[1]}/0"):
        scraping = threading.Thread(target=lambda: answers.append(client.get("/metrics", headers=SCRAPE)))
        scraping.start()
        scraping.join(timeout=60)
    silent.close()

    assert not scraping.is_alive(), "the scrape waited on the silent broker"
    (response,) = answers
    assert response.status_code == 200
    assert b"toolhub_broker_up 0.0" in response.content


def test_a_kept_connection_that_broke_is_replaced_within_the_scrape(client):
    class Broken:
        @property
        def default_channel(self):
            raise ConnectionResetError("the broker restarted")

        def release(self):
            pass

    with on_broker("memory://", f"turns-{uuid.uuid4().hex}"):
        broker._kept = ("memory://", Broken())
        figures = scrape(client)

    assert figures[("toolhub_broker_up", ())] == 1
    assert not isinstance(broker._kept[1], Broken)


@pytest.mark.integration
def test_the_turn_queue_on_redis(client):
    url, queue = os.environ["REDIS_URL"], f"metrics-test-{uuid.uuid4().hex}"
    with on_broker(url, queue):
        empty = scrape(client)  # Redis keeps no key for an empty queue
        publish(url, queue, 4)
        try:
            four = scrape(client)
        finally:
            purge(url, queue)

    assert empty[("toolhub_broker_up", ())] == four[("toolhub_broker_up", ())] == 1
    assert empty[("toolhub_celery_queue_messages", (("queue", queue),))] == 0
    assert four[("toolhub_celery_queue_messages", (("queue", queue),))] == 4
