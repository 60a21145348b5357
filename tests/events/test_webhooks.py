"""Webhooks against a real receiver process (tests/support/webhook_receiver.py: it checks the
signature with plain `hmac`, no code shared with the service) and real `fleet deliver` workers:
signed, refused when tampered, at least once with the event id through a receiver down and a
worker killed mid-delivery, and never to an address inside the house unless an admin allowed it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.utils import timezone

from fleet.events.delivery import deliver_forever
from fleet.events.models import Delivery, Event, Subscription
from fleet.events.outbox import Draft, events_record
from fleet.events.services import subscription_create
from fleet_rules import webhooks
from fleet_rules.vocabulary import DeliveryStatus, EventType
from tests.helpers import REPO, fleet_env, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@dataclass
class Receiver:
    port: int
    secret: str
    log: Path
    mode_file: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "tests/support/webhook_receiver.py"), "--port", str(self.port)]
            + ["--secret", self.secret, "--log", str(self.log), "--mode-file", str(self.mode_file)],
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=0.5)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError("the receiver did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def mode(self, mode: str) -> None:
        self.mode_file.write_text(mode)

    def received(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@pytest.fixture
def receiver(tmp_path) -> Iterator[Receiver]:
    r = Receiver(free_port(), webhooks.secret_new(), tmp_path / "received.jsonl", tmp_path / "mode")
    yield r
    r.stop()


def workers(n: int, *args: str) -> list[subprocess.Popen]:
    """`fleet deliver` processes (their output to a file: a pipe nobody reads fills and blocks them)."""
    started = []
    for _ in range(n):
        with tempfile.TemporaryFile("w+") as output:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "fleet", "deliver", "--idle", "0.05", *args],
                    env=fleet_env(),
                    cwd=REPO,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            )
    return started


def stop_all(processes: list[subprocess.Popen]) -> None:
    for p in processes:
        p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    from django.db.models import Count, Max

    stats = list(Delivery.objects.values("status", "response_code").annotate(n=Count("id"), most=Max("attempts")))
    raise AssertionError(f"timed out waiting for {what}: deliveries {stats}")


def record_events(n: int) -> list[str]:
    events_record(
        [
            Draft(EventType.DEVICE_NEEDS_REPAIR, f"sites/lon-1/devices/n{i:04}", None, {"n": i, "links": {"a": "/x/"}})
            for i in range(n)
        ],
        now=timezone.now(),
    )
    return [str(i) for i in Event.objects.values_list("id", flat=True)]


def test_a_delivery_is_signed_as_standard_webhooks_say_and_a_tampered_body_is_refused(receiver, tmp_path):
    receiver.start()
    subscription_create(name="rma", url=receiver.url, secret=receiver.secret, allow_private=True, actor="t")
    (event_id,) = record_events(1)

    deliver_forever(once=True, idle=0.01)

    (got,) = receiver.received()  # the receiver verified the signature with plain hmac
    assert got["id"] == event_id and got["type"] == EventType.DEVICE_NEEDS_REPAIR
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.response_code, delivery.attempts) == (DeliveryStatus.DELIVERED, 204, 1)

    # The same headers over another body: refused by the receiver's own check.
    body = json.dumps({"specversion": "1.0", "id": event_id, "type": "x", "subject": "y"}).encode()
    timestamp = str(int(time.time()))
    genuine = webhooks.signature(receiver.secret, event_id, int(timestamp), body)
    tampered = body.replace(b'"y"', b'"z"')
    headers = {"webhook-id": event_id, "webhook-timestamp": timestamp, "webhook-signature": genuine}
    assert httpx.post(receiver.url, content=body, headers=headers).status_code == 204
    assert httpx.post(receiver.url, content=tampered, headers=headers).status_code == 401
    assert len(receiver.received()) == 2


def test_a_loopback_target_is_refused_unless_an_admin_allowed_it(receiver):
    receiver.start()
    with pytest.raises(Exception, match="loopback"):
        subscription_create(name="inside", url=receiver.url, secret=receiver.secret, actor="t")
    # A subscription saved when its name resolved outside, that now resolves inside, is refused at delivery.
    Subscription.objects.create(name="rebound", url=receiver.url, secret=receiver.secret, retry_window_seconds=0)
    record_events(1)

    deliver_forever(once=True, idle=0.01)

    assert receiver.received() == []
    delivery = Delivery.objects.get()
    assert delivery.status == DeliveryStatus.FAILED and "127.0.0.1 is a loopback address" in delivery.error
    assert Subscription.objects.get(name="rebound").failing_since is not None


def test_1000_events_through_a_receiver_down_then_up_all_arrive_by_id_with_two_workers(receiver):
    subscription_create(name="rma", url=receiver.url, secret=receiver.secret, allow_private=True, actor="t")
    ids = set(record_events(1000))
    running = workers(2, "--first-backoff", "0.2", "--batch", "200", "--concurrency", "16")
    try:
        # down: every delivery is tried and scheduled again, none delivered
        wait_for(lambda: not Delivery.objects.filter(attempts=0).exists(), 60, "a first try of every delivery")
        assert not Delivery.objects.filter(status=DeliveryStatus.DELIVERED).exists()
        # a while answering 500, then up
        receiver.mode("500")
        receiver.start()
        time.sleep(1)
        receiver.mode("ok")
        wait_for(lambda: ids <= {r["id"] for r in receiver.received() if r["mode"] == "ok"}, 120, "every event")
        wait_for(lambda: Delivery.objects.filter(status=DeliveryStatus.DELIVERED).count() == 1000, 30, "recorded")

        got = receiver.received()
        assert {r["id"] for r in got} == ids  # none lost, nothing else
        delivered_ok = [r["id"] for r in got if r["mode"] == "ok"]
        duplicates = len(delivered_ok) - len(set(delivered_ok))
        assert duplicates <= len(ids) // 10  # at least once: a duplicate carries the same id

        # and with the receiver up, the rate two workers deliver at
        more = record_events(1000)
        fresh = set(more) - ids
        started = time.monotonic()
        wait_for(lambda: fresh <= {r["id"] for r in receiver.received()}, 120, "the second thousand")
        rate = len(fresh) / (time.monotonic() - started)
        sys.stdout.write(f"\nwebhooks: {len(fresh)} events, 2 workers, {len(fresh) / rate:.1f} s: {rate:.0f}/s\n")
    finally:
        stop_all(running)
    assert [p.returncode for p in running] == [0, 0]


def test_a_worker_killed_mid_delivery_leaves_it_to_another_which_sends_the_same_id(receiver):
    receiver.mode("slow:3")
    receiver.start()
    subscription_create(name="rma", url=receiver.url, secret=receiver.secret, allow_private=True, actor="t")
    (event_id,) = record_events(1)
    (first,) = workers(1, "--lease", "2")
    wait_for(lambda: len(receiver.received()) == 1, 30, "the first try to arrive")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert Delivery.objects.get().status == DeliveryStatus.SCHEDULED  # nobody recorded an answer
    receiver.mode("ok")

    second = workers(1, "--lease", "2")
    try:
        wait_for(
            lambda: Delivery.objects.filter(status=DeliveryStatus.DELIVERED).exists(), 30, "the second worker's try"
        )
    finally:
        stop_all(second)
    assert [r["id"] for r in receiver.received()] == [event_id, event_id]  # redelivered, same webhook-id
    assert Delivery.objects.get().attempts == 2


def test_a_subscription_gives_up_after_its_retry_window_and_is_marked_failing_until_a_success(receiver):
    receiver.mode("500")
    receiver.start()
    created = subscription_create(
        name="rma", url=receiver.url, secret=receiver.secret, allow_private=True, retry_window_seconds=1, actor="t"
    )
    record_events(1)

    deadline = time.monotonic() + 30
    while not Delivery.objects.filter(status=DeliveryStatus.FAILED).exists() and time.monotonic() < deadline:
        deliver_forever(once=True, idle=0.01, first_backoff=timedelta(seconds=0.1))
        time.sleep(0.05)

    delivery = Delivery.objects.get()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.attempts >= 2 and delivery.response_code == 500
    assert Subscription.objects.get(id=created.subscription.id).failing_since is not None
    assert len(receiver.received()) == delivery.attempts


def test_deliveries_of_one_subject_arrive_in_order_through_down_slow_500_and_up_each_once(receiver):
    """Four devices, ten events each. The receiver is down, then slow, then answers 500, then is
    up: every event arrives once (answered 2xx once), and per subject in the events' order — a later
    event of a device is never even tried while an earlier one waits for its retry."""
    subscription_create(name="rma", url=receiver.url, secret=receiver.secret, allow_private=True, actor="t")
    start = timezone.now()
    order: dict[str, list[str]] = {}
    for i in range(10):
        drafts = [Draft(EventType.DEVICE_NEEDS_REPAIR, f"sites/lon-1/devices/n{d}", None, {"n": i}) for d in range(4)]
        events_record(drafts, now=start + timedelta(milliseconds=i))
    for event in Event.objects.order_by("time", "id"):
        order.setdefault(event.subject, []).append(str(event.id))
    running = workers(2, "--first-backoff", "0.2", "--concurrency", "8")
    try:
        # down: the first event of each subject is tried (and only it)
        wait_for(lambda: Delivery.objects.filter(attempts__gte=2).count() >= 4, 60, "retries while down")
        # tried: what a try's outcome was recorded for (`attempts` also counts, until the chain's record takes it
        # back, a later delivery leased with the first but not tried after the first failed)
        assert Delivery.objects.filter(last_attempt_at__isnull=False).count() == 4
        receiver.mode("slow:0.3")
        receiver.start()
        wait_for(lambda: len(receiver.received()) >= 8, 60, "slow answers")
        receiver.mode("500")
        wait_for(lambda: sum(r["mode"] == "500" for r in receiver.received()) >= 8, 60, "500 answers")
        receiver.mode("ok")
        wait_for(lambda: Delivery.objects.filter(status=DeliveryStatus.DELIVERED).count() == 40, 120, "every event")
    finally:
        stop_all(running)

    got = receiver.received()
    answered = [r["id"] for r in got if r["mode"] != "500"]  # slow and ok answered 204
    assert sorted(answered) == sorted(i for ids in order.values() for i in ids)  # each once
    for subject, ids in order.items():
        tried = [r["id"] for r in got if r["subject"] == subject]
        head = 0
        for r in (r for r in got if r["subject"] == subject):
            assert r["id"] == ids[head], f"{subject}: {r['id']} tried while {ids[head]} was not delivered ({tried})"
            head += r["mode"] != "500"
        assert head == len(ids)


def test_the_worker_prunes_delivered_events_and_logs_past_the_retention_in_batches(receiver):
    receiver.start()
    subscription_create(name="rma", url=receiver.url, secret=receiver.secret, allow_private=True, actor="t")
    record_events(25)
    deliver_forever(once=True, idle=0.01, prune_every=0)
    assert Delivery.objects.filter(status=DeliveryStatus.DELIVERED).count() == 25
    old = timezone.now() - timedelta(days=31)
    Event.objects.update(time=old)
    Delivery.objects.update(delivered_at=old)
    # one event's delivery failed (kept: Redeliver sends it), one is still scheduled (kept)
    kept = list(Delivery.objects.order_by("id")[:2])
    Delivery.objects.filter(id=kept[0].id).update(status=DeliveryStatus.FAILED, delivered_at=None)
    Delivery.objects.filter(id=kept[1].id).update(
        status=DeliveryStatus.SCHEDULED, next_attempt_at=old + timedelta(days=400)
    )
    before = set(map(str, Event.objects.values_list("id", flat=True)))
    young = set(record_events(1)) - before  # within the retention
    deliver_forever(once=True, idle=0.01, prune_every=0)

    from fleet.events.delivery import prune

    first = prune(batch=10, batches=2)  # bounded: two batches of ten events
    assert first.events == 20
    second = prune(batch=10, batches=5)
    assert second.events == 3 and first.deliveries + second.deliveries == 23
    assert prune() == (0, 0)
    remaining = set(map(str, Event.objects.values_list("id", flat=True)))
    assert remaining == {str(kept[0].event_id), str(kept[1].event_id), *young}
    assert Delivery.objects.count() == 3

    # the worker prunes by itself (on start, then every --prune-every seconds)
    Delivery.objects.filter(id=kept[0].id).update(status=DeliveryStatus.DELIVERED, delivered_at=old)
    deliver_forever(once=True, idle=0.01)
    assert not Delivery.objects.filter(id=kept[0].id).exists()
    assert not Event.objects.filter(id=kept[0].event_id).exists()


def test_the_connection_goes_only_to_the_address_checked_at_connect_time(receiver):
    """DNS rebinding: the worker's client resolves the name when it connects, checks every
    address, and connects to the checked one — a name resolving to loopback (`localhost`) is
    refused by the connection itself, not only by the check before it; an admin-allowed
    subscription's client reaches it."""
    from fleet.events.delivery import new_client

    receiver.start()
    url = f"http://localhost:{receiver.port}/hook"
    with new_client() as checked, pytest.raises(httpx.ConnectError, match="refused when connecting to localhost"):
        checked.post(url, content=b"{}")
    assert receiver.received() == []
    with new_client(allow_private=True) as private:
        assert private.get(f"http://localhost:{receiver.port}/").status_code in {200, 404, 501}
    with new_client() as checked, pytest.raises(httpx.ConnectError, match="127.0.0.1 is a loopback address"):
        checked.get(f"http://127.0.0.1:{receiver.port}/")
