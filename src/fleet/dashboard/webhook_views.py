"""The webhooks' pages, for admins (subscriptions hold signing secrets and say where the fleet's
news goes): the subscriptions, a subscription's delivery log, and redelivering what failed —
Post/Redirect/Get with a one-time token, as every action of the dashboard (`actions.py`)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views import View

from fleet.core.exceptions import FleetError
from fleet.dashboard import access
from fleet.dashboard.actions import no_store, refused, see_other, token_of, with_token
from fleet.dashboard.forms import CONFIRM_ERRORS, TOKEN_ERRORS, KnownValueField, QueryForm, query_problems
from fleet.events import selectors
from fleet.events.services import deliveries_redeliver
from fleet.inventory.identity import actor_label
from fleet.jobs.receipts import action_once, receipt_of
from fleet_rules.vocabulary import DeliveryStatus, PersonAction

VIEW_SUBSCRIPTIONS = "events.view_subscription"
CHANGE_SUBSCRIPTIONS = "events.change_subscription"
LOG_ROWS = 100


class StatusFilter(QueryForm):
    """The delivery log's query: a status (or every one); anything else is a 400 naming it."""

    status = KnownValueField(noun="delivery status", known=DeliveryStatus.values)


class RedeliverForm(forms.Form):
    token = forms.UUIDField(error_messages=TOKEN_ERRORS)
    confirm = forms.BooleanField(error_messages=CONFIRM_ERRORS)


class SubscriptionsPage(access.Page, View):
    permission_required = VIEW_SUBSCRIPTIONS
    action = "see webhook subscriptions"

    def get(self, request: HttpRequest) -> HttpResponse:
        return render(request, "dashboard/webhooks.html", {"subscriptions": selectors.subscriptions_page()})


class SubscriptionPage(access.Page, View):
    permission_required = VIEW_SUBSCRIPTIONS
    action = "see webhook deliveries"

    def get(self, request: HttpRequest, name: str) -> HttpResponse:
        subscription = selectors.subscription_by_name(name=name)
        form = StatusFilter(request.GET)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        status = form.cleaned_data["status"] or None
        log = selectors.delivery_log(subscription, limit=LOG_ROWS, status=status)
        failed, _ = selectors.failed_deliveries(subscription, shown=0)
        context = {
            "subscription": subscription,
            "log": log,
            "status": status,
            "statuses": DeliveryStatus.values,
            "failed": failed,
            "can_redeliver": request.user.has_perm(CHANGE_SUBSCRIPTIONS),
        }
        return render(request, "dashboard/webhook.html", context)


class Redeliver(access.Page, View):
    """GET: what redelivering sends (the failed deliveries, counted and named); POST: schedule them
    again, once per token, and back to the log."""

    permission_required = CHANGE_SUBSCRIPTIONS
    action = "redeliver failed webhook deliveries"

    def get(self, request: HttpRequest, name: str) -> HttpResponse:
        if "token" not in request.GET:
            return with_token(request)
        token = token_of(request)
        if token is None:
            return refused(request, "Not a form token: open a new confirmation.", 400)
        subscription = selectors.subscription_by_name(name=name)
        count, first = selectors.failed_deliveries(subscription)
        context = {"subscription": subscription, "count": count, "first": first, "token": token}
        context["used"] = receipt_of(token)
        return no_store(render(request, "dashboard/webhook_redeliver.html", context))

    def post(self, request: HttpRequest, name: str) -> HttpResponse:
        form = RedeliverForm(request.POST)
        if not form.is_valid():
            return refused(request, query_problems(form), 400)
        subscription = selectors.subscription_by_name(name=name)
        location = reverse("dashboard:webhook", args=[subscription.name])

        def perform() -> tuple[str, dict[str, Any]]:
            scheduled = deliveries_redeliver(subscription_id=subscription.id)
            return f"{location}?status={DeliveryStatus.SCHEDULED}", {"scheduled": scheduled}

        try:
            receipt = action_once(
                token=form.cleaned_data["token"],
                action=PersonAction.WEBHOOK_REDELIVER,
                subject=f"subscription {subscription.name}",
                requested_by=actor_label(request.user),
                perform=perform,
            )
        except FleetError as exc:
            return refused(request, exc.detail, exc.status_code)
        return see_other(receipt.location)
