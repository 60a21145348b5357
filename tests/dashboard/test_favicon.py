"""Browsers ask for /favicon.ico on every visit: it answers with the icon (it was a 404, logged as a
WARNING on each visit of the demo), and every page links it."""

from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_favicon_ico_leads_to_the_icon(client):
    response = client.get("/favicon.ico")

    assert response.status_code == 301
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert icon["Content-Type"].startswith("image/svg+xml")
    assert b"<svg" in b"".join(icon.streaming_content)


@pytest.mark.django_db
def test_pages_link_the_icon(client):
    page = client.get("/accounts/login/")

    assert page.status_code == 200
    assert b'rel="icon" href="/static/dashboard/favicon.svg"' in page.content
