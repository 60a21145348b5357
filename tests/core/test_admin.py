"""The admin: every model has a working list and detail page; agent-owned data is read-only."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from tests.burnin.test_rerun import World


@pytest.fixture
def populated(fleet):
    world = World(fleet)
    world.result(world.diag, device=world.devices[0])
    world.sweep()
    from tests.jobs.test_jobs import new_job

    new_job(world.site, world.satellite, world.devices[1])
    return world


def test_every_model_has_a_changelist_and_a_change_page(client, user_factory, populated):
    client.force_login(user_factory(username="root", superuser=True))
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        response = client.get(changelist, {"q": "a"} if model_admin.search_fields else {})
        assert response.status_code == 200, changelist
        obj = model.objects.first()
        if obj is not None:
            page = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
            assert client.get(page).status_code == 200, page


def test_agent_owned_and_declared_data_cannot_be_added_by_hand(client, user_factory, populated):
    client.force_login(user_factory(username="root", superuser=True))
    for name in (
        "burnin_testexecution",
        "burnin_evaluationresult",
        "burnin_policyprogress",
        "jobs_job",
        "policies_acceptancepolicy",
        "policies_thresholdrule",
    ):
        assert client.get(reverse(f"admin:{name}_add")).status_code == 403, name


def test_read_only_records_show_no_save_or_delete_and_are_titled_in_words(client, user_factory, populated):
    from fleet.burnin.models import PolicyProgress, TestExecution

    client.force_login(user_factory(username="root", superuser=True))
    execution = TestExecution.objects.get()
    page = client.get(reverse("admin:burnin_testexecution_change", args=[execution.pk])).content.decode()
    assert 'name="_save"' not in page and "deletelink" not in page
    row = PolicyProgress.objects.filter(device=populated.devices[0], requirement=populated.diag).get()
    title = client.get(reverse("admin:burnin_policyprogress_change", args=[row.pk])).content.decode()
    assert f"gpu-diag · {populated.devices[0].hostname}: passed" in title
    assert 'name="_save"' not in title


def test_executions_and_evaluation_results_are_found_by_hostname(client, user_factory, populated):
    client.force_login(user_factory(username="root", superuser=True))
    hostname = populated.devices[0].hostname
    for name, noun in (("burnin_testexecution", "test execution"), ("burnin_evaluationresult", "evaluation result")):
        found = client.get(reverse(f"admin:{name}_changelist"), {"q": hostname}).content.decode()
        assert f"1 {noun}" in found, name
        missing = client.get(reverse(f"admin:{name}_changelist"), {"q": "no-such-host"}).content.decode()
        assert f"0 {noun}s" in missing, name
