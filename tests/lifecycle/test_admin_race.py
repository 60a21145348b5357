"""A state change in the admin that loses a race to another writer is refused on the page, not a
server error: the device keeps the other writer's state and the admin's change leaves no trace."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction
from django.test import Client

from fleet.inventory.models import Device
from fleet.lifecycle.models import DeviceStateChange
from fleet.lifecycle.services import device_transition
from fleet_rules.vocabulary import DeviceState, Mover
from tests.burnin.certs import evaluate_now, sweep
from tests.support.locks import wait_for_lock_wait

RC = "gpu.h200.8x"


@pytest.mark.django_db(transaction=True)
def test_an_admin_state_change_losing_a_race_is_refused_on_the_page(fleet, user_factory):
    satellite = fleet.satellite(fleet.site("lon-1"), "sat-a")
    diag = fleet.requirement(fleet.policy(RC, auto_accept=True), "gpu-diag")
    device = fleet.device(satellite, RC, hostname="n0")
    evaluate_now(fleet.execution(diag, device=device, metrics={"diag_failed_tests": {"value": 0}}))
    sweep(satellite)
    device.refresh_from_db()
    assert device.state == DeviceState.ACCEPTED
    client = Client(raise_request_exception=False)
    client.force_login(user_factory("root", superuser=True))
    answers: list[int] = []

    def admin_takes_it_out_for_maintenance() -> None:
        try:
            response = client.post(
                f"/admin/inventory/device/{device.id}/change/",
                {
                    "site": device.site_id,
                    "satellite": device.satellite_id,
                    "hostname": device.hostname,
                    "serial": device.serial,
                    "resource_class": device.resource_class,
                    "state": DeviceState.MAINTENANCE.value,
                    "enrolled_at_0": "2026-12-01",
                    "enrolled_at_1": "10:00:00",
                    "memberships-TOTAL_FORMS": "0",
                    "memberships-INITIAL_FORMS": "0",
                },
            )
            answers.append(response.status_code)
        finally:
            connections.close_all()

    # Given another writer holding the device while it puts it into service
    with transaction.atomic():
        device_transition(
            device_id=device.id, to=DeviceState.IN_SERVICE, mover=Mover.OPERATOR, actor="user:other", certified=True
        )
        admin = threading.Thread(target=admin_takes_it_out_for_maintenance)
        admin.start()
        # When the admin's change, read before that move commits, waits for the device
        wait_for_lock_wait("the admin's state change")
    admin.join(30)

    # Then the page refuses it (back to the form with the reason), and only the other move happened
    assert answers == [302]
    assert Device.objects.get(id=device.id).state == DeviceState.IN_SERVICE
    assert not DeviceStateChange.objects.filter(actor="user:root").exists()
    page = client.get(f"/admin/inventory/device/{device.id}/change/")
    assert b"moved it meanwhile" in page.content or b"another change" in page.content, page.content[:2000]
