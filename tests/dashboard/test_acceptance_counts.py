"""The certified counts of the overview, the site page and the device page are the devices holding
a valid certificate (docs/certificates.md: acceptance is gated by evidence), not a re-reading of
every device's rows: a certificate past its `valid_until` no longer counts, even before the sweep
that marks its pass expired."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from fleet.burnin.models import AcceptanceCertificate
from tests.dashboard.conftest import VIEWER


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_each_accepted_count_is_the_devices_with_a_valid_certificate(person, burnt_in):
    current = AcceptanceCertificate.objects.filter(superseded_at__isnull=True)
    assert sorted(current.values_list("device__hostname", flat=True)) == ["a00-n01", "a00-n02", "a00-n03"]
    viewer = person(VIEWER)
    assert "3 of 8</strong> enrolled devices certified" in text(viewer.get("/"))
    current.filter(device__hostname="a00-n01").update(valid_until=timezone.now() - timedelta(minutes=1))
    assert "2 of 8</strong> enrolled devices certified" in text(viewer.get("/"))
    assert "2 of 8</strong> enrolled devices certified" in text(viewer.get("/sites/lon-1/"))
    # The lifecycle state moves at the next sweep (its certificate is superseded as expired); the
    # page says at once that it is no longer certified.
    assert "· not certified yet" in text(viewer.get("/sites/lon-1/devices/a00-n01/"))
    assert "· certified" in text(viewer.get("/sites/lon-1/devices/a00-n02/"))
