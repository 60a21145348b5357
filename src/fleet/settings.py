"""Settings for the fleet-burnin service, read from the environment.

`DATABASE_URL` selects the PostgreSQL server; when it is unset the service starts (or attaches
to) an embedded PostgreSQL in `FLEET_DATA_DIR/postgres`, so a fresh machine needs no setup.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.management.utils import get_random_secret_key

from fleet.core.error_schema import ERROR_COMPONENTS
from fleet_rules.vocabulary import (
    Comparator,
    DeviceState,
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


DATA_DIR = Path(os.environ.get("FLEET_DATA_DIR", ".fleet")).resolve()

DEBUG = _env_bool("DEBUG", False)
_secret = os.environ.get("SECRET_KEY")
if not _secret:
    # A stable key per data folder keeps sessions and signed cursors valid across restarts
    # without asking a first-time user to invent one.
    _key_file = DATA_DIR / "secret_key"
    if _key_file.exists():
        _secret = _key_file.read_text().strip()
    else:
        _secret = get_random_secret_key()
        try:
            DATA_DIR.mkdir(parents=True, exist_ok=True)
            _key_file.write_text(_secret)
            _key_file.chmod(0o600)
        except OSError:
            pass
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
    "fleet.core",
    "fleet.inventory",
    "fleet.policies",
    "fleet.jobs",
    "fleet.burnin",
    "fleet.fleetfile",
    "fleet.demo",
    "fleet.dashboard",
    "django_htmx",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
_default_db["OPTIONS"].setdefault("connect_timeout", _env_int("FLEET_DB_CONNECT_TIMEOUT", 5))
_default_db["TEST"] = {"NAME": os.environ.get("FLEET_TEST_DB_NAME") or None}
DATABASES = {"default": _default_db}
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
    },
    "DEFAULT_SCOPES": ["fleet:read"],
    "SCOPES_BACKEND_CLASS": "fleet.inventory.identity.ClientScopes",
    "ACCESS_TOKEN_EXPIRE_SECONDS": _env_int("FLEET_ACCESS_TOKEN_SECONDS", 3600),
    "PKCE_REQUIRED": False,
}

# --- Domain settings ------------------------------------------------------------------------
FLEET = {
    "EVALUATION_RESULTS_MAX_ITEMS": _env_int("FLEET_EVALUATION_RESULTS_MAX_ITEMS", 1000),
    "RECONCILE_GUARD_ABSOLUTE": _env_int("FLEET_RECONCILE_GUARD_ABSOLUTE", 50),
    "RECONCILE_GUARD_RATIO": _env_float("FLEET_RECONCILE_GUARD_RATIO", 0.10),
    "JOB_LEASE_SECONDS": _env_int("FLEET_JOB_LEASE_SECONDS", 300),
    "PENDING_FEED_MAX_LIMIT": 500,
    "RERUN_MAX_DEVICES": _env_int("FLEET_RERUN_MAX_DEVICES", 5000),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("FLEET_LOG_LEVEL", "INFO")},
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        "django.request": {"level": "ERROR"},
        "django.db.backends": {"level": "INFO"},
    },
}

# Swappable-model settings django-oauth-toolkit expects to find (needed by makemigrations).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth2_provider.AccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth2_provider.RefreshToken"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth2_provider.Grant"
