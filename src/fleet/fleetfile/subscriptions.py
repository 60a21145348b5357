"""The fleet file's webhook subscriptions (docs/events.md): created or updated by `fleet apply`,
in its transaction; a problem (a refused URL, a secret variable not set) is a problem of the file."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from fleet.core.exceptions import FleetError
from fleet.events.models import Subscription
from fleet.events.services import subscription_create, subscription_update
from fleet.fleetfile.document import FleetDocument, FleetFileError
from fleet.fleetfile.summary import Change
from fleet.inventory.models import Site


def subscriptions_apply(document: FleetDocument, *, count: Callable[[str, Any], None], notes: list[str]) -> None:
    """Create or update the declared webhook subscriptions (never pruned: a receiver's
    subscription is removed through the API or the dashboard). A secret comes from the
    environment variable the file names; a new one without it is minted and shown once."""
    existing = {s.name: s for s in Subscription.objects.all()}
    sites = dict(Site.objects.values_list("slug", "id"))
    problems: list[tuple[str, str]] = []
    for index, decl in enumerate(document.subscriptions):
        where = f"subscriptions[{index}]"
        if decl.site is not None and decl.site not in sites:
            problems.append((f"{where}.site", f"no site {decl.site!r}"))
            continue
        site = Site.objects.get(slug=decl.site) if decl.site else None
        secret = os.environ.get(decl.secret_env) if decl.secret_env else None
        if decl.secret_env and not secret:
            problems.append((f"{where}.secret_env", f"the environment variable {decl.secret_env} is not set"))
            continue
        current = existing.get(decl.name)
        try:
            if current is None:
                created = subscription_create(
                    name=decl.name,
                    url=decl.url,
                    event_types=decl.event_types,
                    site=site,
                    allow_private=decl.allow_private,
                    secret=secret,
                    actor="fleet-file",
                )
                if secret is None:
                    notes.append(f"subscription {decl.name}: its signing secret is {created.secret} (shown once)")
                count("subscriptions", Change.CREATED)
                continue
            same = (
                current.url == decl.url
                and sorted(current.event_types) == sorted(set(decl.event_types))
                and current.site_id == (site.id if site else None)
                and current.allow_private == decl.allow_private
                and (secret is None or secret == current.secret)
            )
            if same:
                count("subscriptions", Change.UNCHANGED)
                continue
            subscription_update(
                subscription_id=current.id,
                url=decl.url,
                event_types=decl.event_types,
                site=site,
                allow_private=decl.allow_private,
                secret=secret,
            )
            count("subscriptions", Change.UPDATED)
        except FleetError as exc:
            problems.append((f"{where}.url", exc.detail))
    if problems:
        raise FleetFileError(problems)
