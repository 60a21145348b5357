"""The dashboard's lifecycle pages: a site's repair queue (devices in needs_repair, why, since
when) with its circuit breakers. They read through `fleet.burnin.reads.repairs`, the same reads as
the API's repair queue and breakers."""

from __future__ import annotations

from dataclasses import fields

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import View

from fleet.burnin.reads.repairs import repair_queue_page
from fleet.dashboard import access


class RepairQueuePage(access.Page, View):
    permission_required = access.VIEW_DEVICES

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        read = repair_queue_page(slug)
        context = {f.name: getattr(read, f.name) for f in fields(read)} | {
            "open_breakers": read.open_breakers,
            "rendered_at": timezone.now(),
        }
        return render(request, "dashboard/repairs.html", context)
