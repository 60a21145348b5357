"""State-changing dashboard actions (rerun dispatch, job cancel, culprit isolation): each is
Post/Redirect/Get with a one-time token from its preview, asks for confirmation stating what it
will touch, answers a replay with its first result, and is refused (403) to viewers and
satellites. Issue 27, findings 7, 8 and 12 (isolation)."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection, connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from fleet.burnin.diagnosis.isolation import isolation_dispatch
from fleet.burnin.models import DeviceDiagnosis, IsolationPlan
from fleet.burnin.reruns.service import rerun_dispatch
from fleet.dashboard.forms import ALL_FAILED
from fleet.inventory.models import Device
from fleet.jobs.models import Job
from fleet.jobs.services import job_finish
from fleet_rules.vocabulary import IsolationStatus, JobStatus, PlanningMode
from tests.dashboard.conftest import DISPATCH, OPERATOR, VIEWER, build_site, csrf, form_fields, post, preview
from tests.dashboard.test_pages import shown, text
from tests.diagnosis.test_isolation import Rack


def _without(fields: dict[str, list[str]], name: str) -> dict[str, list[str]]:
    return {k: v for k, v in fields.items() if k != name}


def _receipts() -> int:
    """Tokens recorded as used (looked up by name: before the fix there was no such table)."""
    from django.apps import apps

    return apps.get_model("jobs", "ActionReceipt").objects.count()


# --- rerun dispatch ---------------------------------------------------------------------------------------


def test_a_preview_is_a_get_page_carrying_its_token_and_naming_what_it_touches(person, burnt_in):
    operator = person(OPERATOR)
    url, page = preview(operator, {"topology": "rack-a01"})
    token = re.fullmatch(r"/sites/lon-1/reruns/preview/([0-9a-f-]{36})/", url).group(1)
    assert form_fields(page, DISPATCH)["token"] == [token]
    assert "1 job to 1 device: a01-n00" in page
    assert "no-store" in operator.get(url)["Cache-Control"]
    assert Job.objects.count() == 0 and _receipts() == 0  # a preview creates nothing
    again = operator.get("/sites/lon-1/reruns/preview/?topology=rack-a01")  # a bookmarked selection gets a token
    assert again.status_code == 302 and again["Location"] != url and "/reruns/preview/" in again["Location"]


def test_a_dispatch_redirects_to_its_result_and_a_replay_after_the_job_ended_creates_nothing(person, burnt_in):
    operator = person(OPERATOR)
    url, page = preview(operator, {"topology": "rack-a01"})
    fields = form_fields(page, DISPATCH)
    first = post(operator, DISPATCH, fields)
    assert first.status_code == 303
    token = fields["token"][0]
    assert first["Location"] == f"/sites/lon-1/reruns/{token}/"
    job = Job.objects.get()
    job_finish(job_id=job.id, outcome=JobStatus.SUCCEEDED)  # the devices are free again

    replay = post(operator, DISPATCH, fields)  # a reload of the POST, or a second click
    assert replay.status_code == 303 and replay["Location"] == first["Location"]
    assert Job.objects.count() == 1 and _receipts() == 1

    result = shown(operator.get(first["Location"]))
    assert f"/jobs/{job.id}/" in result and "1 job created" in result and "a01-n00" in result
    used = shown(operator.get(url))  # back to the preview: used, linking the result
    assert 'id="dispatch"' not in used and "already dispatched" in used and first["Location"] in used


def test_preview_again_posts_the_selection_as_it_was_made_under_a_new_token(person, burnt_in):
    operator = person(OPERATOR)
    url, page = preview(operator, {"select": ALL_FAILED})
    fields = form_fields(page, "/sites/lon-1/reruns/preview/")
    assert fields == {"select": [ALL_FAILED]}  # not thousands of resolved device ids
    again = post(operator, "/sites/lon-1/reruns/preview/", fields | {"mode": ["all"]})
    assert again.status_code == 303 and again["Location"] != url
    assert "mode <strong>all</strong>" in operator.get(again["Location"]).content.decode()


def test_two_concurrent_dispatches_with_one_token_create_one_job(transactional_db, fleet, user_factory):
    build_site(fleet, racks=2)
    from django.contrib.auth.models import Permission

    user = user_factory(username="op")
    for perm in OPERATOR:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    browsers = [Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)]
    browsers[0].force_login(user)
    _, page = preview(browsers[0], {"select": ALL_FAILED})
    browsers[1].cookies = browsers[0].cookies  # one person's browser: the form sent twice at once
    fields = form_fields(page, DISPATCH)
    tokens = [csrf(b) for b in browsers]
    start = threading.Barrier(2)
    answers: list[object] = [None, None]

    def dispatch(i: int) -> None:
        try:
            start.wait()
            answers[i] = browsers[i].post(DISPATCH, fields | {"csrfmiddlewaretoken": tokens[i]})
        finally:
            connections.close_all()

    threads = [threading.Thread(target=dispatch, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a.status_code for a in answers] == [303, 303]
    assert answers[0]["Location"] == answers[1]["Location"] == f"/sites/lon-1/reruns/{fields['token'][0]}/"
    assert Job.objects.count() == 2  # a00-n00 and a01-n00, once
    assert _receipts() == 1


def test_dispatching_to_several_devices_needs_the_confirmation_that_names_them(person, burnt_in):
    operator = person(OPERATOR)
    _, page = preview(operator, {"select": ALL_FAILED})
    assert "I will dispatch 2 jobs to 2 devices: a00-n00, a01-n00" in page
    fields = form_fields(page, DISPATCH)
    refused = post(operator, DISPATCH, _without(fields, "confirm"))
    assert refused.status_code == 400 and "Tick the confirmation" in shown(refused)
    assert Job.objects.count() == 0 and _receipts() == 0
    assert post(operator, DISPATCH, fields).status_code == 303
    assert Job.objects.count() == 2


def test_a_dispatch_never_touches_a_device_its_preview_did_not_name(person, burnt_in):
    operator = person(OPERATOR)
    a00 = Device.objects.get(hostname="a00-n00")
    busy = rerun_dispatch(site=burnt_in.site, device_ids=[a00.id], mode=PlanningMode.NON_PASSING, requested_by="t")
    _, page = preview(operator, {"select": ALL_FAILED})
    assert "1 job to 1 device: a01-n00" in page  # a00-n00 is held: already dispatched
    job_finish(job_id=busy.created_jobs[0].job_id, outcome=JobStatus.SUCCEEDED)  # now it would plan a00-n00 too
    refused = post(operator, DISPATCH, form_fields(page, DISPATCH))
    assert refused.status_code == 409
    assert "a00-n00" in shown(refused) and "Preview again" in shown(refused)
    assert Job.objects.count() == 1 and _receipts() == 0


def test_a_token_is_a_uuid_and_one_used_elsewhere_is_refused(person, burnt_in):
    operator = person(OPERATOR)
    _, page = preview(operator, {"topology": "rack-a01"})
    fields = form_fields(page, DISPATCH)
    assert post(operator, DISPATCH, fields | {"token": ["not-a-token"]}).status_code == 400
    assert post(operator, DISPATCH, _without(fields, "token")).status_code == 400
    assert post(operator, DISPATCH, fields).status_code == 303
    job = Job.objects.get()
    reused = post(operator, f"/jobs/{job.id}/cancel/", {"token": fields["token"], "confirm": "on"})
    assert reused.status_code == 400 and "already used" in shown(reused)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


# --- cancel -----------------------------------------------------------------------------------------------


def test_cancel_asks_for_confirmation_and_a_replay_answers_with_the_job(person, burnt_in):
    operator = person(OPERATOR)
    a00 = Device.objects.get(hostname="a00-n00")
    rerun_dispatch(site=burnt_in.site, device_ids=[a00.id], mode=PlanningMode.NON_PASSING, requested_by="t")
    job = Job.objects.get()
    detail = text(operator.get(f"/jobs/{job.id}/"))
    assert f'href="/jobs/{job.id}/cancel/"' in detail  # a link to the confirmation, not a one-click POST
    response = operator.get(f"/jobs/{job.id}/cancel/")
    assert response.status_code == 302 and "token=" in response["Location"]
    page = shown(operator.get(response["Location"]))
    assert f"I will cancel job {job.id}" in page and "a00-n00" in page
    fields = form_fields(page, f"/jobs/{job.id}/cancel/")
    refused = post(operator, f"/jobs/{job.id}/cancel/", _without(fields, "confirm"))
    assert refused.status_code == 400
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED
    first = post(operator, f"/jobs/{job.id}/cancel/", fields)
    assert first.status_code == 303 and first["Location"] == f"/jobs/{job.id}/"
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    replay = post(operator, f"/jobs/{job.id}/cancel/", fields)
    assert replay.status_code == 303 and replay["Location"] == f"/jobs/{job.id}/"  # not a 409 page
    used = shown(operator.get(response["Location"]))
    assert "already used" in used and 'id="confirm-cancel"' not in used


# --- isolation --------------------------------------------------------------------------------------------


def test_an_operator_previews_dispatches_and_follows_isolation_through_the_dashboard(person, fleet):
    rack = Rack(fleet)
    operator = person(OPERATOR)
    failures = text(operator.get("/sites/lon-1/failures/"))
    link = f"/sites/lon-1/isolation/preview/?topology={rack.rack.id}&amp;requirement=rack-nccl"
    assert link in failures
    first = operator.get(link.replace("&amp;", "&"))
    assert first.status_code == 302 and "token=" in first["Location"]
    page = shown(operator.get(first["Location"]))
    assert "cohort of 8" in page and "at most 4 rounds" in page
    assert "I will dispatch 2 diagnostic jobs to 8 devices: a01-n00, a01-n01" in page
    fields = form_fields(page, "/sites/lon-1/isolation/dispatch/")
    assert post(operator, "/sites/lon-1/isolation/dispatch/", _without(fields, "confirm")).status_code == 400
    assert IsolationPlan.objects.count() == 0
    dispatched = post(operator, "/sites/lon-1/isolation/dispatch/", fields)
    plan = IsolationPlan.objects.get()
    assert dispatched.status_code == 303 and dispatched["Location"] == f"/sites/lon-1/isolation/{plan.id}/"
    assert post(operator, "/sites/lon-1/isolation/dispatch/", fields)["Location"] == dispatched["Location"]
    assert IsolationPlan.objects.count() == 1 and Job.objects.count() == 2
    assert "round 1" in shown(operator.get(dispatched["Location"]))
    another = shown(operator.get(operator.get(link.replace("&amp;", "&"))["Location"]))  # a new preview of it
    assert 'id="start-isolation"' not in another and f"/sites/lon-1/isolation/{plan.id}/" in another

    advance = f"/sites/lon-1/isolation/{plan.id}/advance/"
    while plan.status == IsolationStatus.RUNNING:
        rack.run_round()
        answer = post(operator, advance, {})
        assert answer.status_code == 303 and answer["Location"] == dispatched["Location"]
        plan.refresh_from_db()
    assert plan.status == IsolationStatus.FOUND
    page = shown(operator.get(dispatched["Location"]))
    assert "culprit" in page and "a01-n05" in page
    fragment = shown(operator.get(dispatched["Location"] + "?fragment=plan", HTTP_HX_REQUEST="true"))
    assert "<html" not in fragment and "a01-n05" in fragment
    assert DeviceDiagnosis.objects.get().device.hostname == "a01-n05"


def test_an_isolation_preview_of_a_rack_that_did_not_fail_is_a_clear_400(person, fleet):
    rack = Rack(fleet)
    operator = person(OPERATOR)
    other = fleet.topology(rack.satellite, "rack", "rack-z9")
    response = operator.get(f"/sites/lon-1/isolation/preview/?topology={other.id}&requirement=rack-nccl", follow=True)
    assert response.status_code == 400 and "rack-z9" in shown(response)
    assert operator.get(f"/sites/lon-1/isolation/preview/?topology={other.id}&requirement=x&token=x").status_code == 400
    bad = operator.get("/sites/lon-1/isolation/preview/?topology=nope&requirement=rack-nccl")
    assert bad.status_code == 400 and "Traceback" not in text(bad)


# --- who may ---------------------------------------------------------------------------------------------


def test_viewers_and_satellites_are_refused_every_action_and_nothing_is_created(person, fleet, bearer):
    rack = Rack(fleet)
    plan = isolation_dispatch(site=rack.site, topology_id=rack.rack.id, requirement_name="rack-nccl", requested_by="t")
    job = Job.objects.order_by("id").first()
    jobs_before = Job.objects.count()
    viewer = person(VIEWER)
    token = "6f1e0bd2-4c0a-4f53-9a8e-2d6f4b0f3c11"
    posts = {
        DISPATCH: {"token": token, "device": str(rack.devices[0].id), "confirm": "on"},
        f"/jobs/{job.id}/cancel/": {"token": token, "confirm": "on"},
        "/sites/lon-1/isolation/dispatch/": {"token": token, "topology": str(rack.rack.id), "requirement": "rack-nccl"},
        f"/sites/lon-1/isolation/{plan.id}/advance/": {},
    }
    gets = [
        "/sites/lon-1/reruns/preview/?topology=rack-a01",
        f"/jobs/{job.id}/cancel/",
        f"/sites/lon-1/isolation/preview/?topology={rack.rack.id}&requirement=rack-nccl",
    ]
    for url, data in posts.items():
        assert post(viewer, url, data).status_code == 403, url
    for url in gets:
        assert viewer.get(url).status_code == 403, url
    api = bearer(["fleet:read", "job:run"], satellite=rack.satellite, name="sat-a-client")
    satellite = Client(HTTP_AUTHORIZATION=api._credentials["HTTP_AUTHORIZATION"])  # its token, on the pages
    for url, data in posts.items():
        assert satellite.post(url, data).status_code == 403, url
    assert Job.objects.count() == jobs_before and _receipts() == 0
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


def test_each_refusal_names_the_role_its_page_needs(person, burnt_in):
    nobody = shown(person([], username="nobody").get("/"))
    assert "viewer role" in nobody and "dispatch or cancel" not in nobody
    viewer = person(VIEWER, username="v")
    what_if = shown(viewer.get("/what-if/"))
    assert "operator role" in what_if and "what-if" in what_if and "dispatch or cancel" not in what_if
    dispatch = shown(post(viewer, DISPATCH, {"token": "6f1e0bd2-4c0a-4f53-9a8e-2d6f4b0f3c11"}))
    assert "operator role" in dispatch and "dispatch reruns" in dispatch
    job_id = "00000000-0000-4000-8000-000000000000"
    cancel = shown(post(viewer, f"/jobs/{job_id}/cancel/", {}))
    assert "operator role" in cancel and "cancel jobs" in cancel


# --- cost ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["preview", "result", "cancel", "isolation-preview", "isolation-plan"])
def test_each_action_page_costs_the_same_queries_at_two_fleet_sizes(person, fleet, page):
    world = build_site(fleet, racks=2)
    operator = person(OPERATOR)
    counts = []
    for grow in (0, 3):
        world.add_racks(grow)
        IsolationPlan.objects.all().delete()
        Job.objects.all().delete()
        url = _page_url(operator, world, page)
        operator.get(url)  # warm: the session, permissions, content types
        with CaptureQueriesContext(connection) as queries:
            assert operator.get(url).status_code == 200, url
        counts.append(len(queries))
    assert len(world.devices) == 20 and counts[0] == counts[1], counts


def _page_url(operator: Client, world, page: str) -> str:
    if page in ("preview", "result"):
        url, html = preview(operator, {"select": ALL_FAILED})
        if page == "preview":
            return url
        return post(operator, DISPATCH, form_fields(html, DISPATCH))["Location"]
    if page == "cancel":
        a00 = Device.objects.get(hostname="a00-n00")
        busy = rerun_dispatch(site=world.site, device_ids=[a00.id], mode=PlanningMode.NON_PASSING, requested_by="t")
        return operator.get(f"/jobs/{busy.created_jobs[0].job_id}/cancel/")["Location"]
    rack = world.racks[1]  # its collective errored
    url = operator.get(f"/sites/lon-1/isolation/preview/?topology={rack.id}&requirement=rack-nccl")["Location"]
    if page == "isolation-preview":
        return url
    html = shown(operator.get(url))
    return post(operator, "/sites/lon-1/isolation/dispatch/", form_fields(html, "/sites/lon-1/isolation/dispatch/"))[
        "Location"
    ]
