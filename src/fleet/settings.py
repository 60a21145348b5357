"""Settings for the fleet-burnin service, read from the environment.

`DATABASE_URL` selects the PostgreSQL server; when it is unset the service starts (or attaches
to) an embedded PostgreSQL in `FLEET_DATA_DIR/postgres`, so a fresh machine needs no setup.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from fleet.core.datadir import data_dir, secret_key_read
from fleet.core.error_schema import ERROR_COMPONENTS
from fleet.core.logs import log_format
from fleet_rules.vocabulary import (
    Comparator,
    DeliveryStatus,
    DeviceState,
    EventType,
    ExclusionReason,
    ExecutionStatus,
    JobStatus,
    PlanningMode,
    RequirementScope,
    SkipReason,
    TopologyUnit,
    Verdict,
    WorkflowName,
)


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return default if raw in (None, "") else int(raw)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return default if raw in (None, "") else float(raw)


#: Absolute, resolved once: FLEET_DATA_DIR, else the checkout's `.fleet` (never the current directory).
DATA_DIR = data_dir(os.environ)

#: Set by the `fleet` command before Django starts: `server` for `fleet serve` (request-serving
#: processes: pooled connections, the API's database timeouts), `command` for every other
#: management command (longer timeouts). Unset (tests, an external server importing
#: `fleet.asgi`/`fleet.wsgi`) means the API's timeouts without a pool.
PROCESS_ROLE = os.environ.get("FLEET_PROCESS_ROLE", "api")

DEBUG = _env_bool("DEBUG", False)
# A stable key per data folder keeps sessions and signed cursors valid across restarts without
# asking a first-time user to invent one; `fleet serve` and `fleet demo` keep one there
# (`secret_key_ensure`). Loading the settings never writes: without either, this process's own.
_secret = os.environ.get("SECRET_KEY") or secret_key_read(DATA_DIR) or get_random_secret_key()
SECRET_KEY = _secret
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "oauth2_provider",
    "axes",
    "fleet.core",
    "fleet.inventory",
    "fleet.policies",
    "fleet.jobs",
    "fleet.events",
    "fleet.lifecycle",
    "fleet.burnin",
    "fleet.repairs",
    "fleet.autopilot",
    "fleet.fleetfile",
    "fleet.access",
    "fleet.demo",
    "fleet.dashboard",
    "django_htmx",
]

MIDDLEWARE = [
    # First: the request id, the request's log line and its metrics (fleet.core.requestlog).
    "fleet.core.requestlog.RequestObservationMiddleware",
    # A strict Content-Security-Policy on every response, the refusals below included (fleet.core.csp).
    "fleet.core.csp.ContentSecurityPolicyMiddleware",
    # /healthz, /readyz, /metrics, whatever the Host header and scheme (fleet.core.probes).
    "fleet.core.probes.ProbesMiddleware",
    # Refuses over-long URLs, bodies over the limit and bodies without a length before anything
    # reads them (fleet.core.bounds).
    "fleet.core.bounds.RequestBoundsMiddleware",
    # A database that is gone (or a cancelled statement) in a view outside DRF: 503, one log line.
    "fleet.core.errors.DatabaseUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # NUL or a lone surrogate in the path (404) or the query (400), for every view at once: text
    # PostgreSQL cannot store (fleet.core.text). After authentication: the error page names the role.
    "fleet.core.text.StorableTextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: locks out repeated failed logins.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend with the password policy (FLEET_PASSWORD_LOGIN; docs/oidc.md).
    "fleet.access.backends.LocalPasswordBackend",
]

ROOT_URLCONF = "fleet.urls"
WSGI_APPLICATION = "fleet.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "fleet.dashboard.access.dashboard_context",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------
_database_url = os.environ.get("DATABASE_URL", "").strip()
if _database_url:
    _default_db = dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)
    _default_db["ENGINE"] = "django.db.backends.postgresql"
else:
    _default_db = {
        "ENGINE": "fleet.core.dbbackend",
        "NAME": "fleet",
        "USER": "postgres",
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {},
    }
_default_db.setdefault("OPTIONS", {})
_options = _default_db["OPTIONS"]
_options.setdefault("connect_timeout", _env_int("FLEET_DB_CONNECT_TIMEOUT", 5))
# Every request is bounded in time: a statement, a wait for a lock and an idle open transaction
# each have a limit on the server (a cancelled query answers 503), and TCP keepalives plus
# tcp_user_timeout notice a database that is gone from the network within seconds instead of
# the kernel's ~15 minutes. Management commands (migrate, apply, reconcile) get longer limits.
_command = PROCESS_ROLE == "command"


def _db_timeout(name: str, api_default: float, command_default: float) -> float:
    if _command:
        return _env_float(f"FLEET_DB_COMMAND_{name}", command_default)
    return _env_float(f"FLEET_DB_{name}", api_default)


#: Seconds, per setting of the PostgreSQL session (docs/operations.md, "Bounded requests").
DATABASE_TIMEOUTS = {
    "statement_timeout": _db_timeout("STATEMENT_TIMEOUT", 30, 3600),
    "lock_timeout": _db_timeout("LOCK_TIMEOUT", 10, 60),
    "idle_in_transaction_session_timeout": _db_timeout("IDLE_IN_TRANSACTION_TIMEOUT", 60, 600),
}
#: PostgreSQL's JIT compiles a statement whose estimated cost passes `jit_above_cost`, which
#: stale statistics (a projection analysed full, swept again from empty) make of an ordinary
#: 200 ms statement: 1.35 s of a 1.5 s certificate read was compilation (EXPLAIN ANALYZE), and a
#: first sweep took twice as long. Every statement here is short and index-driven; compiling
#: never pays. FLEET_DB_JIT=on gives the server's setting back.
DATABASE_JIT = os.environ.get("FLEET_DB_JIT", "off").strip().lower()
if DATABASE_JIT not in {"on", "off"}:
    raise ImproperlyConfigured(f"FLEET_DB_JIT must be 'on' or 'off', not {DATABASE_JIT!r}")
_options["options"] = " ".join(
    [
        _options.get("options", ""),
        *(f"-c {name}={int(seconds * 1000)}" for name, seconds in DATABASE_TIMEOUTS.items()),
        *(["-c jit=off"] if DATABASE_JIT == "off" else []),
    ]
).strip()
_options.setdefault("keepalives", 1)
_options.setdefault("keepalives_idle", _env_int("FLEET_DB_KEEPALIVE_IDLE", 5))
_options.setdefault("keepalives_interval", _env_int("FLEET_DB_KEEPALIVE_INTERVAL", 2))
_options.setdefault("keepalives_count", _env_int("FLEET_DB_KEEPALIVE_COUNT", 3))
_options.setdefault("tcp_user_timeout", _env_int("FLEET_DB_TCP_USER_TIMEOUT", 10) * 1000)
if PROCESS_ROLE == "server":
    # `fleet serve` runs Django's ASGI handler, where each request's sync code runs in a thread
    # of its own: persistent per-thread connections would leak, so each process keeps a bounded
    # pool (Django's psycopg pool support). A connection is checked before it is handed out, so
    # the first request after a database restart already works.
    _default_db["CONN_MAX_AGE"] = 0
    _default_db["CONN_HEALTH_CHECKS"] = True  # with a pool: each connection is checked when handed out
    # psycopg_pool retries a lost connection with a doubling delay for `reconnect_timeout` (300 s by
    # default): after a 20 s outage the next attempt came ~10 s after the database was back, and
    # every request until then was a 503. Giving up after a few seconds makes the next request
    # start a fresh attempt at once (tests/reliability/test_faults.py: served again within 5 s).
    _options["pool"] = {
        "min_size": 1,
        "max_size": _env_int("FLEET_DB_POOL_SIZE", 8),
        "timeout": _env_float("FLEET_DB_POOL_TIMEOUT", 5),
        "reconnect_timeout": _env_float("FLEET_DB_POOL_RECONNECT_TIMEOUT", 5),
    }
_default_db["TEST"] = {"NAME": os.environ.get("FLEET_TEST_DB_NAME") or None}
DATABASES = {"default": _default_db}
# A streaming replica for read-only dashboard pages (fleet.core.replica): same options (timeouts,
# pool), another server. Never migrated; tests mirror it onto the default database.
_replica_url = os.environ.get("DATABASE_REPLICA_URL", "").strip()
if _replica_url:
    _replica_db = dj_database_url.parse(_replica_url, conn_max_age=_default_db.get("CONN_MAX_AGE", 60))
    _replica_db["ENGINE"] = "django.db.backends.postgresql"
    _replica_db["CONN_HEALTH_CHECKS"] = True
    _replica_db["OPTIONS"] = {**_options, **_replica_db.get("OPTIONS", {})}
    _replica_db["TEST"] = {"MIRROR": "default"}
    DATABASES["replica"] = _replica_db
DATABASE_ROUTERS = ["fleet.core.replica.ReplicaRouter"]
EMBEDDED_POSTGRES_DIR = DATA_DIR / "postgres"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = os.environ.get("FLEET_STATIC_ROOT") or None  # only for an external web server
# Static files (admin, Swagger UI from the sidecar package) are served by WhiteNoise straight
# from the installed packages: no collectstatic step, no network.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
SESSION_COOKIE_NAME = "sessionid"
CSRF_FAILURE_VIEW = "fleet.core.errors.csrf_failure"

# --- HTTPS and the proxy in front (docs/operations.md, "Production") ------------------------------
HTTPS = _env_bool("FLEET_HTTPS", False)
#: The proxy in front sets X-Forwarded-Proto (and X-Forwarded-For): trust them only when it says so.
TRUSTED_PROXY = _env_bool("FLEET_TRUSTED_PROXY", False)
if TRUSTED_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
if HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = _env_int("FLEET_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("FLEET_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = _env_bool("FLEET_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [
    # HSTS for every subdomain and the browsers' preload list commit the whole domain, which is
    # its owner's decision, not this service's: both are opt-in (FLEET_HSTS_INCLUDE_SUBDOMAINS,
    # FLEET_HSTS_PRELOAD), and while they are off `check --deploy` would warn about them.
    *([] if _env_bool("FLEET_HSTS_INCLUDE_SUBDOMAINS", False) else ["security.W005"]),
    *([] if _env_bool("FLEET_HSTS_PRELOAD", False) else ["security.W021"]),
]

# --- Content-Security-Policy (fleet.core.csp; docs/operations.md, "Content Security Policy") ---------
# The policy itself is fleet.core.csp.DEFAULT_POLICY (CONTENT_SECURITY_POLICY replaces it).
#: Path prefixes whose pages need one directive wider: the Swagger UI's stylesheet draws its icons
#: as data: images.
CONTENT_SECURITY_POLICY_PATHS = {"/api/docs/": {"img-src": "'self' data:"}}

# --- Request bounds (fleet.core.bounds; docs/api.md, "Limits") ------------------------------------
REQUEST_BOUNDS = {
    "MAX_BODY_BYTES": _env_int("FLEET_MAX_BODY_BYTES", 10 * 1024 * 1024),
    "MAX_URL_BYTES": _env_int("FLEET_MAX_URL_BYTES", 4096),
    "MAX_JSON_DEPTH": _env_int("FLEET_MAX_JSON_DEPTH", 64),
    "BODY_READ_TIMEOUT": _env_float("FLEET_BODY_READ_TIMEOUT", 30),
    "HEADER_READ_TIMEOUT": _env_float("FLEET_HEADER_READ_TIMEOUT", 10),
}
#: Bytes a YAML document (a fleet file, a what-if candidate) may have (fleet.core.yamlfiles).
MAX_YAML_BYTES = _env_int("FLEET_MAX_YAML_BYTES", 8 * 1024 * 1024)
# Django's own limits agree with ours (form bodies are decoded by Django, not by our parsers).
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BOUNDS["MAX_BODY_BYTES"]
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000

# --- Caches and throttles ---------------------------------------------------------------------------
# `default` is per process (the schema document, the per-caller request rate); `shared` holds what
# must be counted across every process of the service: failed authentications and token requests
# per address and per client. It is a table in the service's database (created by a migration),
# or Redis when FLEET_CACHE_URL=redis://… says so.
_shared_cache_url = os.environ.get("FLEET_CACHE_URL", "").strip()
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "fleet-default"},
    "shared": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _shared_cache_url}
        if _shared_cache_url
        else {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "fleet_shared_cache",
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    ),
}
THROTTLES = {
    # Failed bearer authentications per client address: 401 until the limit, then 429.
    "AUTH_FAILURES": os.environ.get("FLEET_THROTTLE_AUTH_FAILURES", "30/min"),
    # Token requests, per client address and per client id (each one costs a slow secret hash).
    "TOKEN_PER_ADDRESS": os.environ.get("FLEET_THROTTLE_TOKEN_ADDRESS", "60/min"),
    "TOKEN_PER_CLIENT": os.environ.get("FLEET_THROTTLE_TOKEN_CLIENT", "20/min"),
}
#: Seconds a generated schema document is kept (per process).
SCHEMA_CACHE_SECONDS = _env_int("FLEET_SCHEMA_CACHE_SECONDS", 3600)

# People's logins (django-axes): locked out after repeated failures, per username and address.
AXES_FAILURE_LIMIT = _env_int("FLEET_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=_env_int("FLEET_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "fleet.core.throttling.login_address"
AXES_VERBOSE = False

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "fleet.inventory.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["fleet.core.permissions.ScopeOrModelPermission"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "fleet.core.parsers.StorableJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "fleet.core.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": [
        "fleet.core.throttling.ClientRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("FLEET_THROTTLE_ANON", "300/min"),
        "client": os.environ.get("FLEET_THROTTLE_CLIENT", "20000/min"),
    },
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "fleet.core.pagination.FleetCursorPagination",
    "PAGE_SIZE": 100,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # The address a throttle counts: the peer, or the proxy's X-Forwarded-For entry when trusted.
    "NUM_PROXIES": 1 if TRUSTED_PROXY else 0,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Fleet Manager API",
    "DESCRIPTION": "API for the Nscale Fleet Manager",
    "VERSION": "1.0.0",
    "SCHEMA_PATH_PREFIX": "/",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": False,
    "ENUM_ADD_EXPLICIT_BLANK_NULL_CHOICE": False,
    "ENUM_NAME_OVERRIDES": {
        "ComparatorTypeEnum": Comparator.choices,
        "StandupTopologyUnitEnum": TopologyUnit.choices,
        "RerunWorkflowNameEnum": WorkflowName.choices,
        "RerunPlanningModeEnum": PlanningMode.choices,
        "RerunPlanSkipReasonEnum": SkipReason.choices,
        "RerunPlanExcludedDeviceReasonEnum": ExclusionReason.choices,
        "DeviceStateEnum": DeviceState.choices,
        "VerdictEnum": Verdict.choices,
        "ExecutionStatusEnum": ExecutionStatus.choices,
        "JobStatusEnum": JobStatus.choices,
        "RequirementScopeEnum": RequirementScope.choices,
        "EventTypeEnum": EventType.choices,
        "DeliveryStatusEnum": DeliveryStatus.choices,
    },
    "APPEND_COMPONENTS": {"schemas": ERROR_COMPONENTS},
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "OAUTH2_FLOWS": [],
    "DISABLE_ERRORS_AND_WARNINGS": False,
}

# --- OAuth2 (django-oauth-toolkit) ---------------------------------------------------------
OAUTH2_PROVIDER = {
    "SCOPES": {
        "fleet:read": "Read inventory, policies, jobs and burn-in results",
        "test-execution:report": "Report test executions and their metrics",
        "test-execution:evaluate": "Read pending evaluations and upsert evaluation results",
        "burn-in-policy-progress:write": "Reconcile the burn-in policy-progress projection",
        "job:run": "Claim, heartbeat and finish burn-in jobs; satellite heartbeats",
        "job:create": "Create jobs and dispatch reruns",
        "fleet:metrics": "Scrape /metrics (Prometheus)",
        "webhooks:manage": "Manage webhook subscriptions and redeliver (admins)",
    },
    "DEFAULT_SCOPES": ["fleet:read"],
    "SCOPES_BACKEND_CLASS": "fleet.inventory.identity.ClientScopes",
    "OAUTH2_VALIDATOR_CLASS": "fleet.inventory.oauth_validator.BearerTokenValidator",
    "ACCESS_TOKEN_EXPIRE_SECONDS": _env_int("FLEET_ACCESS_TOKEN_SECONDS", 3600),
    # Machines use the client-credentials grant and nothing else: the token endpoint's server
    # knows no other grant, and no authorization, device or registration endpoint is routed.
    "OAUTH2_SERVER_CLASS": "oauthlib.oauth2.BackendApplicationServer",
    # RFC 9700 (the OAuth 2.0 security BCP), adopted whole: tokens stored hashed, accepted only in
    # the Authorization header; the rest guards grants this service does not offer at all.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_SCHEME": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https"],
    "PKCE_REQUIRED": True,
}

# --- Domain settings ------------------------------------------------------------------------
FLEET = {
    "EVALUATION_RESULTS_MAX_ITEMS": _env_int("FLEET_EVALUATION_RESULTS_MAX_ITEMS", 1000),
    "RECONCILE_GUARD_ABSOLUTE": _env_int("FLEET_RECONCILE_GUARD_ABSOLUTE", 50),
    "RECONCILE_GUARD_RATIO": _env_float("FLEET_RECONCILE_GUARD_RATIO", 0.10),
    "JOB_LEASE_SECONDS": _env_int("FLEET_JOB_LEASE_SECONDS", 300),
    "PENDING_FEED_MAX_LIMIT": 500,
    "RERUN_MAX_DEVICES": _env_int("FLEET_RERUN_MAX_DEVICES", 10_000),
    # The remediation ladder (docs/remediation.md): GPU resets and reboots a device may take within the window
    # before a fault that persists sends it to repair.
    "REMEDY_RESETS": _env_int("FLEET_REMEDY_RESETS", 1),
    "REMEDY_REBOOTS": _env_int("FLEET_REMEDY_REBOOTS", 1),
    "REMEDY_WINDOW_HOURS": _env_int("FLEET_REMEDY_WINDOW_HOURS", 24),
}

#: The Ed25519 private key (PEM, PKCS#8) that signs acceptance certificates and evidence packs, as an
#: absolute path resolved here once. Minted only by `fleet keys init` (or the demo), and it signs only
#: once published (`fleet keys publish` after pointing this at a new key: the old ones stay published).
CERTIFICATE_KEY_FILE = str(
    Path(os.environ["FLEET_CERTIFICATE_KEY_FILE"]).resolve()
    if os.environ.get("FLEET_CERTIFICATE_KEY_FILE")
    else DATA_DIR / "certificate_key.pem"
)

# --- Monitoring (fleet.core.metrics, fleet.core.probes; docs/operations.md, "Monitoring") -------------
#: Who may scrape /metrics without a token: addresses or networks (FLEET_METRICS_ALLOW, comma-separated).
METRICS_ALLOW = [a.strip() for a in os.environ.get("FLEET_METRICS_ALLOW", "127.0.0.0/8,::1").split(",") if a.strip()]
#: Seconds a process keeps the gauges it read from the database for a scrape.
METRICS_CACHE_SECONDS = _env_float("FLEET_METRICS_CACHE_SECONDS", 10)

# JSON lines (one object per line, with the request id) unless a person is watching the terminal.
LOG_FORMAT = log_format(os.environ.get("FLEET_LOG_FORMAT", "auto"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "fleet.core.logs.JsonLines"}, "text": {"()": "fleet.core.logs.TextLines"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("FLEET_LOG_LEVEL", "INFO")},
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
        "django.request": {"level": "ERROR"},
        "django.db.backends": {"level": "INFO"},
        "fleet.request": {"level": os.environ.get("FLEET_REQUEST_LOG_LEVEL", "INFO")},
        # Their DEBUG lines hold the token responses (access tokens): never below INFO.
        "oauthlib": {"level": "INFO"},
        "oauth2_provider": {"level": "INFO"},
    },
}

# Swappable-model settings django-oauth-toolkit expects to find (needed by makemigrations).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"

# --- events out (fleet.events) ----------------------------------------------------------------
#: The service's address as receivers reach it: an event's `source` and the base of its links.
FLEET_PUBLIC_URL = os.environ.get("FLEET_PUBLIC_URL", "http://127.0.0.1:8000").strip().rstrip("/")
#: How long delivered events and their delivery logs are kept; `fleet deliver` deletes older ones
#: (docs/events.md). Events with a delivery still scheduled or failed are kept whatever their age.
FLEET_EVENTS_RETENTION_DAYS = _env_int("FLEET_EVENTS_RETENTION_DAYS", 30)

# --- people signing in with the company's OpenID Connect provider (fleet.access.oidc; docs/oidc.md) --


def _role_groups(text: str) -> dict[str, tuple[str, ...]]:
    """`admin=fleet-admins;operator=fleet-operators,gpu-ops;viewer=fleet-viewers` → role → groups."""
    mapping: dict[str, tuple[str, ...]] = {}
    for part in text.split(";"):
        role, _, groups = part.partition("=")
        if role.strip():
            mapping[role.strip()] = tuple(g.strip() for g in groups.split(",") if g.strip())
    return mapping


FLEET_OIDC = {
    "issuer": os.environ.get("FLEET_OIDC_ISSUER", "").strip(),
    "client_id": os.environ.get("FLEET_OIDC_CLIENT_ID", "").strip(),
    "client_secret": os.environ.get("FLEET_OIDC_CLIENT_SECRET", "").strip(),
    "scopes": os.environ.get("FLEET_OIDC_SCOPES", "openid email profile groups").strip(),
    "groups_claim": os.environ.get("FLEET_OIDC_GROUPS_CLAIM", "groups").strip(),
    "role_groups": _role_groups(
        os.environ.get("FLEET_OIDC_ROLE_GROUPS", "admin=fleet-admins;operator=fleet-operators;viewer=fleet-viewers")
    ),
    "name": os.environ.get("FLEET_OIDC_NAME", "your identity provider").strip(),
}
#: `on` | `admins` (break-glass superusers only) | `off`; with a provider configured, `admins` by default.
FLEET_PASSWORD_LOGIN = os.environ.get(
    "FLEET_PASSWORD_LOGIN", "admins" if FLEET_OIDC["issuer"] and FLEET_OIDC["client_id"] else "on"
).strip()
