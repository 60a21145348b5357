"""What a selector or service does not find is a `NotFoundError`; the dashboard shows it as its
404 page in one place (`access.Page`), actions included."""

from __future__ import annotations

from tests.dashboard.conftest import OPERATOR, VIEWER

NO_SUCH_JOB = "00000000-0000-4000-8000-000000000000"


def test_cancelling_a_job_that_does_not_exist_is_the_404_page(person, burnt_in):
    operator = person(OPERATOR)
    operator.get("/jobs/")
    token = "6f1e0bd2-4c0a-4f53-9a8e-2d6f4b0f3c11"
    response = operator.post(
        f"/jobs/{NO_SUCH_JOB}/cancel/",
        {"csrfmiddlewaretoken": operator.cookies["csrftoken"].value, "token": token, "confirm": "on"},
    )
    assert response.status_code == 404
    assert "404 — not found" in response.content.decode()
    assert operator.get(f"/jobs/{NO_SUCH_JOB}/cancel/?token={token}").status_code == 404  # its confirmation


def test_a_certificate_page_of_an_unknown_device_site_or_serial_is_the_404_page(person, burnt_in):
    viewer = person(VIEWER)
    assert viewer.get("/sites/lon-1/devices/no-such-host/certificate/").status_code == 404
    assert viewer.get("/sites/no-such-site/devices/a00-n01/certificate/").status_code == 404
    assert viewer.get("/sites/lon-1/devices/a00-n01/certificate/?serial=nope").status_code == 404
