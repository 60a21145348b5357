"""Who is calling, and what that confines them to.

A caller is a person (a Django user, signed in with a session) or a machine client (an OAuth2
bearer token). A client bound to a satellite (`SatelliteCredential`) acts only as that satellite
and only on its site, with the satellite scopes; a client owned by an active person is that
person's automation. Every other client — e.g. one whose satellite was deleted — may not act.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeAlias, TypeVar
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Model, Q, QuerySet
from oauth2_provider.models import AbstractAccessToken, AbstractApplication
from oauth2_provider.scopes import SettingsScopes
from oauth2_provider.settings import oauth2_settings

from fleet.core.exceptions import PermissionDeniedError
from fleet.core.permissions import scope_usable
from fleet.inventory.models import Device, OperatorCredential, Satellite, SatelliteCredential, Topology
from fleet_rules.vocabulary import DeviceState, Mover, Vocabulary

#: What a satellite's agent needs; operators' own clients may also hold `job:create`.
SATELLITE_SCOPES = (
    "fleet:read",
    "test-execution:report",
    "test-execution:evaluate",
    "burn-in-policy-progress:write",
    "job:run",
)


@dataclass(eq=False)
class ClientPrincipal:
    """`request.user` for bearer-token requests (client-credentials tokens carry no person)."""

    token: AbstractAccessToken
    user: AbstractBaseUser | None = None
    is_authenticated: bool = field(default=True, init=False)
    is_anonymous: bool = field(default=False, init=False)
    is_active: bool = field(default=True, init=False)
    is_staff: bool = field(default=False, init=False)
    is_superuser: bool = field(default=False, init=False)
    pk: None = field(default=None, init=False)
    id: None = field(default=None, init=False)

    @property
    def application(self) -> AbstractApplication:
        return self.token.application

    @cached_property
    def satellite(self) -> Satellite | None:
        """The satellite this client is bound to, with its site: loaded with the token
        (`BearerTokenValidator`), or looked up once per request for a token loaded otherwise."""
        application = self.token.application
        if application is None:
            return None
        try:
            credential = application.satellite_credential
        except SatelliteCredential.DoesNotExist:
            return None
        return credential.satellite

    @cached_property
    def owner(self) -> AbstractBaseUser | None:
        """The person an operator client acts for; None for a satellite's client."""
        if self.satellite is not None or self.application.user_id is None:
            return None
        return self.application.user

    @property
    def site_id(self) -> UUID | None:
        satellite = self.satellite
        return satellite.site_id if satellite else None

    def has_perm(self, perm: str, obj: Model | None = None) -> bool:
        return False

    def has_perms(self, perms: Any, obj: Model | None = None) -> bool:
        return False

    def get_username(self) -> str:
        return f"client:{self.application.name}"

    def principal_label(self) -> str:
        """Who this is in a log line: `satellite:<site>/<name>` once the request has looked its
        satellite up, else `client:<name>` (a satellite's client is named after it). Never a query."""
        satellite = self.__dict__.get("satellite")
        if satellite is not None:
            return f"satellite:{satellite.site.slug}/{satellite.name}"
        return self.get_username()

    def __str__(self) -> str:
        return self.get_username()


#: Whoever a service acts for: a client, a person, or nobody in particular (a command, a test).
Actor: TypeAlias = ClientPrincipal | AbstractBaseUser | AnonymousUser | None


class PrincipalKind(Vocabulary):
    CLIENT = "client"
    USER = "user"

    @property
    def label(self) -> str:
        return self.value


@dataclass(frozen=True)
class Caller:
    """What `whoami` tells a caller about itself."""

    principal: str
    kind: PrincipalKind
    scopes: list[str]
    site_slug: str | None
    satellite_name: str | None


def describe_caller(actor: Actor, scopes: list[str]) -> Caller:
    satellite = caller_satellite(actor)
    return Caller(
        principal=actor_label(actor),
        kind=PrincipalKind.CLIENT if isinstance(actor, ClientPrincipal) else PrincipalKind.USER,
        scopes=sorted(scopes),
        site_slug=satellite.site.slug if satellite else None,
        satellite_name=satellite.name if satellite else None,
    )


def actor_label(actor: Actor) -> str:
    """A short, stable description of who did something, for audit fields."""
    if isinstance(actor, ClientPrincipal):
        return actor.get_username()
    if actor is not None and actor.is_authenticated:
        return f"user:{actor.get_username()}"
    return Mover.SYSTEM.value


def caller_satellite(actor: Actor) -> Satellite | None:
    """The satellite a caller is bound to, if it is one's client."""
    return actor.satellite if isinstance(actor, ClientPrincipal) else None


# --- reach: which sites and devices a principal may see and write ------------------------------
#
# The one authorization rule over sites and devices (NetBox's `RestrictedQuerySet.restrict`): every
# view, selector and satellite write asks it here, and `tests/inventory/test_one_reach.py` fails on
# a module that compares a caller's site or satellite by hand. People (and their operator clients)
# reach every site, within their permissions; a satellite's client sees its own site and writes
# only what it serves: the devices it manages that are not decommissioned, the topologies it
# manages, its own jobs and scopes.


@dataclass(frozen=True)
class Reach:
    """What one principal may see and write; `site_id`/`satellite_id` None: not confined."""

    site_id: UUID | None = None
    satellite_id: UUID | None = None

    @property
    def confined(self) -> bool:
        return self.site_id is not None

    def sees_site(self, site_id: UUID) -> bool:
        return self.site_id is None or self.site_id == site_id

    def writes_for(self, satellite_id: UUID | None, *, state: str | None = None) -> bool:
        """May this principal write evidence for what `satellite_id` serves (a device in `state`,
        or a topology or job when None)? A decommissioned device is served by no satellite."""
        if self.satellite_id is None:
            return True
        return satellite_id == self.satellite_id and state != DeviceState.DECOMMISSIONED


def reach(actor: Actor) -> Reach:
    """The principal's reach (no query: a satellite's client carries its satellite)."""
    satellite = caller_satellite(actor)
    return Reach(satellite.site_id, satellite.id) if satellite is not None else Reach()


_Q = TypeVar("_Q", bound=QuerySet[Any])


def restrict(queryset: _Q, actor: Actor, *, site_lookup: str = "site_id", shared: bool = False) -> _Q:
    """Rows of `queryset` the principal may see: a satellite's client its own site's only
    (`site_lookup` is the path from a row to its site's id; `shared`: rows of no site, such as
    default thresholds, are everyone's)."""
    site_id = reach(actor).site_id
    if site_id is None:
        return queryset
    own = Q(**{site_lookup: site_id})
    return queryset.filter(own | Q(**{f"{site_lookup}__isnull": True}) if shared else own)


def ensure_site_allowed(actor: Actor, site_id: UUID) -> None:
    """A satellite-bound client may act only on its own site (403 otherwise)."""
    if not reach(actor).sees_site(site_id):
        raise PermissionDeniedError("This client is bound to another site.")


def ensure_acts_as_satellite(actor: Actor, satellite: Satellite) -> None:
    """A satellite-bound client may act only as its own satellite (403 otherwise)."""
    if not reach(actor).writes_for(satellite.id):
        raise PermissionDeniedError(
            f"This client is bound to satellite {caller_satellite(actor)}; it cannot act as {satellite}."
        )


def ensure_reaches(
    actor: Actor,
    *,
    device_ids: Iterable[UUID] = (),
    topology_ids: Iterable[UUID] = (),
    satellite_id: UUID | None = None,
) -> None:
    """A satellite writes only what it serves: each device (one query) must be one it manages and
    not decommissioned, each topology (one query) one it manages, `satellite_id` (a job's, say) its
    own; else a 403 naming what it does not serve. People and operator clients: no query."""
    where = reach(actor)
    if where.satellite_id is None:
        return
    refused: list[str] = []
    if satellite_id is not None and not where.writes_for(satellite_id):
        raise PermissionDeniedError("This belongs to another satellite; a satellite writes only its own.")
    devices = sorted(set(device_ids))
    if devices:
        rows = Device.objects.filter(id__in=devices).values_list("hostname", "satellite_id", "state")
        refused += [
            f"device {hostname} ({'decommissioned' if state == DeviceState.DECOMMISSIONED else 'another satellite'})"
            for hostname, serving, state in rows
            if not where.writes_for(serving, state=state)
        ]
    topologies = sorted(set(topology_ids))
    if topologies:
        rows_t = Topology.objects.filter(id__in=topologies).values_list("label", "satellite_id")
        refused += [f"topology {label}" for label, serving in rows_t if not where.writes_for(serving)]
    if refused:
        raise PermissionDeniedError(
            f"This satellite does not serve {', '.join(sorted(refused))}: a satellite writes only its own devices."
        )


def ensure_not_satellite(
    actor: Actor, why: str = "A satellite's client cannot read or change device lifecycles."
) -> None:
    """Operations on a device's lifecycle (and its evidence pack) are people's and their clients':
    a satellite reports evidence, it never moves devices (403)."""
    if reach(actor).confined:
        raise PermissionDeniedError(why)


def ensure_satellite_client(actor: Actor) -> None:
    """Operations made for an agent (its node gate's reads) are satellites' only: a person or an
    operator client is refused (403)."""
    if not reach(actor).confined:
        raise PermissionDeniedError("This operation is for a satellite's agent; people read the device pages.")


# --- which scopes a client may hold ---------------------------------------------------------------

SATELLITE, OPERATOR = "satellite", "operator"


def client_kind(application: AbstractApplication) -> str | None:
    """`satellite` (bound to a live satellite), `operator` (owned by an active user) or None."""
    if SatelliteCredential.objects.filter(application_id=application.pk).exists():
        return SATELLITE
    if application.user_id is not None and application.user.is_active:
        return OPERATOR
    return None


def operator_scopes(application: AbstractApplication) -> list[str]:
    """What an operator client may ask for: the scopes it was issued for (all, for a client made
    without `--scope`, e.g. in the admin) that its owner could use today."""
    issued = OperatorCredential.objects.filter(application_id=application.pk).values_list("scopes", flat=True).first()
    known = list(oauth2_settings.SCOPES)
    owner = application.user
    return [s for s in (known if issued is None else issued) if s in known and scope_usable(s, owner)]


class ClientScopes(SettingsScopes):
    """django-oauth-toolkit's scopes backend, failing closed: a satellite's client gets the
    satellite scopes and nothing more, an operator client what `operator_scopes` allows (its
    requests are checked against its owner's permissions again each time), any other client
    none."""

    def get_available_scopes(
        self, application: AbstractApplication | None = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        scopes: list[str] = super().get_available_scopes(application, request, *args, **kwargs)
        if application is None:
            return scopes
        kind = client_kind(application)
        if kind == SATELLITE:
            return [s for s in scopes if s in SATELLITE_SCOPES]
        if kind == OPERATOR:
            allowed = operator_scopes(application)
            return [s for s in scopes if s in allowed]
        return []

    def get_default_scopes(
        self, application: AbstractApplication | None = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        if application is not None and client_kind(application) == SATELLITE:
            return list(SATELLITE_SCOPES)
        defaults: list[str] = super().get_default_scopes(application, request, *args, **kwargs)
        return defaults
