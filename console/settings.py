"""Settings, read from the environment once (django-environ).

The embedded default (no variables set) is SQLite plus kombu's filesystem
transport under ``var/``: one machine, no servers. Production sets
``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL`` (Redis).
"""

import ipaddress
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import django_stubs_ext
import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

# ModelAdmin[Agent] and the like, as the type checker reads them, also work at run time.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# Real environment variables win over the file; ENV_FILE names another file than the project's .env.
environ.Env.read_env(os.environ.get("ENV_FILE") or BASE_DIR / ".env")

# Read after the .env file, so a VAR_DIR there counts; a relative path is taken from the project directory.
VAR_DIR = BASE_DIR / env.str("VAR_DIR", default="var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is off (see .env.example).")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"  # noqa: S105
# Fernet keys encrypting agents' signing secrets at rest (first encrypts, all decrypt); default: from SECRET_KEY.
SIGNING_SECRET_KEYS = env.list("SIGNING_SECRET_KEYS", default=[])
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# demo/ (the demo fleet, the volume generator, seed_demo): make run (DEBUG) and the suite (make test sets it),
# never a production deployment.
DEMO_APPS = env.bool("DEMO_APPS", default=DEBUG)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "ninja",
    "csp",
    "axes",
    "workflows",
    "console",
    *(["demo"] if DEMO_APPS else []),
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "workflows.api.middleware.LeanApiMiddleware",  # /api/ stops here: the agent API needs nothing below
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "console.security.PrivatePagesMiddleware",
    "console.security.IdleSessionMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it turns a lockout raised by the login into its 429 page
]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out username or address
    "console.sso.PasswordBackend",  # Django's ModelBackend, off for all but BREAK_GLASS_USERS with PASSWORD_LOGIN=false
    "console.sso.OIDCBackend",  # single sign-on; answers nothing until OIDC_RP_CLIENT_ID is set
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            # {% partialdef %} and {% partial %} in every template, as Django 6 will have them built in.
            "builtins": ["template_partials.templatetags.partials"],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.views.notifications.unread_notifications",
                "console.context.demo",
                "console.context.broker",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'console.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout let the web process, the worker and beat share one file.
    # Tests on SQLite use a file, not memory, so live-server threads get connections of their own.
    DATABASES["default"].setdefault("TEST", {"NAME": str(VAR_DIR / "test.sqlite3")})
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
# The hot paths' own statements (a delivery's lease and success record) prepared once per connection
# (workflows/models/base.py, statement_cursor). Off behind a pooler that cannot keep prepared statements
# (PgBouncer before 1.21, or without max_prepared_statements, in transaction pooling).
PREPARED_STATEMENTS = env.bool("PREPARED_STATEMENTS", default=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}
if CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache":
    CACHES["default"]["BACKEND"] = "console.cache.RedisCache"  # the same cache, one client per pool (console/cache.py)

AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env.int("PASSWORD_MIN_LENGTH", default=12)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Single sign-on through an OpenID Connect provider (console/sso.py): on when OIDC_RP_CLIENT_ID is set.
# Authorisation code flow with PKCE; state and nonce checked; the ID token's RS256 signature (from the
# JWKS), audience, issuer and expiry verified.
OIDC_RP_CLIENT_ID = env.str("OIDC_RP_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("OIDC_RP_CLIENT_SECRET", default="")
OIDC_OP_ISSUER = env.str("OIDC_OP_ISSUER", default="")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_OP_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_OP_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OIDC_OP_USER_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_OP_JWKS_ENDPOINT", default="")
OIDC_RP_SCOPES = env.str("OIDC_RP_SCOPES", default="openid email profile groups")
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="single sign-on")
OIDC_GROUP_CLAIM = env.str("OIDC_GROUP_CLAIM", default="groups")
OIDC_GROUP_MAP = env.json("OIDC_GROUP_MAP", default={})  # {"idp group": ["role:operator", "team:billing"]}
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_TIMEOUT = env.int("OIDC_TIMEOUT", default=10)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"
OIDC_CREATE_USER = True
# Local passwords: off leaves only the BREAK_GLASS_USERS (comma-separated user names) signing in with one.
PASSWORD_LOGIN = env.bool("PASSWORD_LOGIN", default=True)
BREAK_GLASS_USERS = env.list("BREAK_GLASS_USERS", default=[])

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "queue"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every start when collectstatic has not run yet
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Hashed, compressed files need `collectstatic` (the Docker image runs it);
        # tests and local runs serve the files as they are.
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if env.bool("MANIFEST_STATIC", default=not DEBUG)
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- Browser and sign-in protections (README "Security") -----------------------------
# TLS=true: the console is served over https by a TLS-terminating proxy in front of it
# (docker-compose.yml's Caddy), which sets X-Forwarded-Proto. Only then is that header trusted;
# plain http is redirected to https and browsers are told to stay on https (HSTS).
TLS = env.bool("TLS", default=False)
if TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # the container's own health check speaks http
    SECURE_HSTS_SECONDS = env.int("HSTS_SECONDS", default=365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("HSTS_PRELOAD", default=True)
# How many proxies append to X-Forwarded-For in front of the console (the client address of
# login lockouts and API failed-auth limits); 0 trusts no header and uses the socket's address.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=1 if TLS else 0)
SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=TLS or not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Idle sessions end: a sign-in lasts this long after the last activity (console.security).
SESSION_COOKIE_AGE = env.int("SESSION_IDLE_SECONDS", default=8 * 3600)
# Scripts and styles come from our own static files only: no inline script, no eval, no third party.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [NONE],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
        "object-src": [NONE],
        "manifest-src": [SELF],
        "worker-src": [SELF],
    }
}
# Password guessing (django-axes): after LOGIN_FAILURE_LIMIT failures for one username, or from one
# address, both /login/ and /admin/login/ refuse for LOGIN_LOCKOUT_MINUTES (429 and a page saying so).
AXES_ENABLED = env.bool("LOGIN_LOCKOUT", default=True)
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# axes resets by the lockout parameters, so its reset on success would clear every failure from the
# address (another account's guesses included). A sign-in forgets only its own username's failures
# from its own address instead (console.security._forget_own_failures).
AXES_RESET_ON_SUCCESS = False
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # attempts while locked are refused, not re-counted
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "access.addresses.client_address"
AXES_VERBOSE = False

# --- Agent API -------------------------------------------------------------
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=1024 * 1024)
API_RATE_LIMIT_PER_MINUTE = env.int("API_RATE_LIMIT_PER_MINUTE", default=1200)
# Requests without a valid token from one client address per minute; above it they answer 429.
API_AUTH_FAILURES_PER_MINUTE = env.int("API_AUTH_FAILURES_PER_MINUTE", default=30)
# An agent token seen this recently is resolved from the cache (CACHE_URL) without a query;
# rotating or revoking the token drops it at once. 0 turns the cache off.
AGENT_TOKEN_CACHE_SECONDS = env.int("AGENT_TOKEN_CACHE_SECONDS", default=30)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(API_MAX_BODY_BYTES, 2_621_440)

# --- Recovery behaviour ----------------------------------------------------
# A delivery attempt holds a lease this long; a sweeper reclaims expired ones.
DELIVERY_LEASE_SECONDS = env.int("DELIVERY_LEASE_SECONDS", default=60)
DELIVERY_TIMEOUT_SECONDS = env.float("DELIVERY_TIMEOUT_SECONDS", default=10.0)
DELIVERY_MAX_ATTEMPTS = env.int("DELIVERY_MAX_ATTEMPTS", default=6)
DELIVERY_BACKOFF_SECONDS = env.float("DELIVERY_BACKOFF_SECONDS", default=2.0)
# A worker on Redis whose queues held messages this long while it took none exits to be started again:
# Celery's consumer can stall after Redis restarts (console/watchdog.py). 0 turns the watchdog off.
WORKER_WATCHDOG_SECONDS = env.float("WORKER_WATCHDOG_SECONDS", default=300.0)
# Where deliveries may go (workflows/runtime.py): https only, and no loopback, private or link-local
# targets, unless DEBUG; the networks listed in DELIVERY_ALLOWED_NETWORKS (CIDR) are allowed anyway.
DELIVERY_REQUIRE_HTTPS = env.bool("DELIVERY_REQUIRE_HTTPS", default=not DEBUG)
DELIVERY_REFUSE_PRIVATE_ADDRESSES = env.bool("DELIVERY_REFUSE_PRIVATE_ADDRESSES", default=not DEBUG)
DELIVERY_ALLOWED_NETWORKS = env.list("DELIVERY_ALLOWED_NETWORKS", default=[])
# How often the outbox relay and the sweeps run (Celery beat and the relay loop).
SWEEP_INTERVAL_SECONDS = env.float("SWEEP_INTERVAL_SECONDS", default=5.0)
# A rollout (workflows/models/rollouts.py) sends at most its ``per_minute`` decisions per this window, and
# looks again this soon at a wave that has not settled; tests and `make chaos` shorten both.
ROLLOUT_RATE_WINDOW_SECONDS = env.float("ROLLOUT_RATE_WINDOW_SECONDS", default=60.0)
ROLLOUT_RECHECK_SECONDS = env.float("ROLLOUT_RECHECK_SECONDS", default=15.0)
# A workflow whose agent says nothing for this long gets a checkpoint (per agent override).
AGENT_SILENCE_SECONDS = env.int("AGENT_SILENCE_SECONDS", default=900)
# Replays (issue 11): bounded in range, request size, concurrency per agent and time.
REPLAY_MAX_STEPS = env.int("REPLAY_MAX_STEPS", default=50)
REPLAY_MAX_REQUEST_BYTES = env.int("REPLAY_MAX_REQUEST_BYTES", default=1_048_576)
REPLAY_MAX_CONCURRENT_PER_AGENT = env.int("REPLAY_MAX_CONCURRENT_PER_AGENT", default=2)
REPLAY_TIMEOUT_SECONDS = env.float("REPLAY_TIMEOUT_SECONDS", default=30.0)
REPLAY_DEADLINE_SECONDS = env.int("REPLAY_DEADLINE_SECONDS", default=300)

# --- Notifications (SLA warnings, breaches, escalations, reminders) -----------
# Links in emails and webhooks point here. `make run PORT=8200` passes CONSOLE_PORT to every process (the
# worker sends the emails), so the default follows the port the console really listens on.
CONSOLE_URL = env.str("CONSOLE_URL", default=f"http://127.0.0.1:{env.int('CONSOLE_PORT', default=8000)}")
# Django's email backend from one URL: smtp://user:pass@host:587 (add ?ssl=True / tls), consolemail://,
# or filemail:// — the default writes each email as a file under EMAIL_FILE_PATH (var/mail/), so
# `make run` needs no mail server.
_email = env.email_url("EMAIL_URL", default="filemail://")
EMAIL_BACKEND = _email["EMAIL_BACKEND"]
EMAIL_HOST, EMAIL_PORT = _email.get("EMAIL_HOST") or "localhost", _email.get("EMAIL_PORT") or 25
EMAIL_HOST_USER, EMAIL_HOST_PASSWORD = _email.get("EMAIL_HOST_USER") or "", _email.get("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS, EMAIL_USE_SSL = bool(_email.get("EMAIL_USE_TLS")), bool(_email.get("EMAIL_USE_SSL"))
# django-environ drops the leading slash of a filemail:// path, so the directory is its own variable.
EMAIL_FILE_PATH = env.str("EMAIL_FILE_PATH", default=str(VAR_DIR / "mail"))
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Recovery Console <console@localhost>")
NOTIFY_TIMEOUT_SECONDS = env.float("NOTIFY_TIMEOUT_SECONDS", default=10.0)
NOTIFY_MAX_ATTEMPTS = env.int("NOTIFY_MAX_ATTEMPTS", default=6)
NOTIFY_BACKOFF_SECONDS = env.float("NOTIFY_BACKOFF_SECONDS", default=5.0)
# --- Channels: Slack (workflows/slack/) and email action links ------------------
# The Slack Web API (a test or the demo points it at a loopback fake); the workspace itself is
# connected in the admin. A failed Slack call is retried with backoff up to the maximum, or after
# Slack's Retry-After on a rate limit.
SLACK_API_URL = env.str("SLACK_API_URL", default="https://slack.com/api/")
SLACK_TIMEOUT_SECONDS = env.float("SLACK_TIMEOUT_SECONDS", default=10.0)
SLACK_BACKOFF_SECONDS = env.float("SLACK_BACKOFF_SECONDS", default=5.0)
SLACK_MAX_BACKOFF_SECONDS = env.float("SLACK_MAX_BACKOFF_SECONDS", default=600.0)
# How long a one-time link (linking a Slack user, or acting from a notification email) stays valid.
ACTION_LINK_MAX_AGE_SECONDS = env.int("ACTION_LINK_MAX_AGE_SECONDS", default=24 * 3600)
SLACK_LINK_MAX_AGE_SECONDS = env.int("SLACK_LINK_MAX_AGE_SECONDS", default=15 * 60)
# Web Push (workflows/push.py): the VAPID key pair that signs every push, as `manage.py vapid_keys` prints it
# (the private key, base64url; the public key is derived from it). Empty: Web Push is off (a check says so).
# VAPID_SUBJECT is how a push service reaches whoever runs the console (mailto: or https:). A push the device
# cannot take within PUSH_TTL_SECONDS is dropped by the push service (the bell still has it).
VAPID_PRIVATE_KEY = env.str("VAPID_PRIVATE_KEY", default="")
VAPID_SUBJECT = env.str("VAPID_SUBJECT", default="mailto:console@localhost")
PUSH_TTL_SECONDS = env.int("PUSH_TTL_SECONDS", default=4 * 3600)
# --- Prometheus /metrics ----------------------------------------------------
# Scrapers prove who they are with this bearer token, or come from these addresses (CIDRs);
# with neither set, /metrics answers 403 to everyone.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Parsed here so that a mistyped network stops the console at start, not a scrape at 3 a.m.
METRICS_ALLOWED_IPS = [
    str(ipaddress.ip_network(net.strip(), strict=False))
    for net in env.list("METRICS_ALLOWED_IPS", default=[])
    if net.strip()
]
# The four shares cover this many trailing days; a scrape is reused by every web worker this long.
METRICS_SHARE_DAYS = env.int("METRICS_SHARE_DAYS", default=28)
METRICS_CACHE_SECONDS = env.int("METRICS_CACHE_SECONDS", default=15)

# --- Celery ----------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    CELERY_BROKER_TRANSPORT = "console.folder_broker:Transport"  # messages written whole or not at all
    _queue_dir = VAR_DIR / "broker"
    for _sub in ("out", "processed", "control"):
        (_queue_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir / "out"),
        "data_folder_out": str(_queue_dir / "out"),
        "processed_folder": str(_queue_dir / "processed"),
        "control_folder": str(_queue_dir / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Every task is far shorter than this; a killed worker's unacked task
        # comes back after it (kombu >= 5.7 restores promptly on worker loss).
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=600),
        # How often a worker scans for unacked tasks older than the visibility timeout.
        "unacked_restore_interval": env.int("CELERY_UNACKED_RESTORE_INTERVAL", default=10),
        "unacked_restore_throttle": 1,
        # Without these, .delay() blocks forever when Redis hangs.
        "socket_timeout": 5,
        "socket_connect_timeout": 5,
        "max_retries": 1,
    }
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="console")
CELERY_BROKER_CONNECTION_TIMEOUT = 5
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # redeliver work lost with a worker:
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # safe because every task is idempotent
# Remote control (celery inspect/ping) listens on a Redis pub/sub channel, and a worker whose Redis restarts
# can die reconnecting it ("'NoneType' object has no attribute 'hostname'" in kombu, seen by make chaos --hard).
# The console sends no control commands: off unless asked for (make bench turns it on to ping its workers).
CELERY_WORKER_ENABLE_REMOTE_CONTROL = env.bool("CELERY_WORKER_ENABLE_REMOTE_CONTROL", default=False)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fix-up closes the database connection before and after every task unless told to reuse it
# (celery/celery#9824 took CONN_MAX_AGE back out of it): each delivery paid for a new PostgreSQL connection,
# a backend forked and authenticated, more than the delivery's own statements. A worker keeps its connection
# for this many tasks; around each task console/celery.py applies Django's own rules, as a request does
# (closed past CONN_MAX_AGE, after an error that left it unusable, or when its health check fails).
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_TASK_TIME_LIMIT = 120
CELERY_TASK_SOFT_TIME_LIMIT = 90
# Timers are data (indexed deadline columns); one periodic sweep applies them with conditional updates.
# The daily rollups the resume dashboard and readiness read (workflows/rollups/) are re-rolled this often;
# the days touched since are computed live meanwhile, so this trades freshness of the rows for page time.
ROLLUP_INTERVAL_SECONDS = env.float("ROLLUP_INTERVAL_SECONDS", default=60.0)
CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": "workflows.tasks.sweep", "schedule": SWEEP_INTERVAL_SECONDS},
    "roll-figures": {"task": "workflows.tasks.roll_figures", "schedule": ROLLUP_INTERVAL_SECONDS},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = TIME_ZONE


def _is_quiet_get(record: Any) -> bool:
    """A dev-server access line that carries no news for the person at the terminal: a GET that succeeded
    (``"GET /… HTTP/1.1" 200 …``, the pages' polls), or any agent API call that succeeded (the demo fleet
    reports a step every few seconds). People's POSTs (claims, decisions) and every 4xx/5xx still show."""
    args = record.args if isinstance(record.args, tuple) else ()
    if len(args) < 2 or str(args[1])[:1] not in "23":
        return False
    method, _, rest = str(args[0]).partition(" ")
    return method in ("GET", "HEAD") or rest.startswith("/api/")


# make run: the demo ledgers (the simulated payment, ticket and messaging systems), linked from the nav
# and from each effect on the workbench. Empty outside the demo.
DEMO_LEDGERS_URL = env.str("DEMO_LEDGERS_URL", default="")
# make run: the dev server logs no line per successful GET (the 2-3 s polls of every open page buried the
# URL and demo passwords printed at start); POSTs and every 4xx/5xx still show.
QUIET_POLL_LOGS = env.bool("QUIET_POLL_LOGS", default=False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {
        "quiet_polls": {
            "()": "django.utils.log.CallbackFilter",
            "callback": lambda record: not (QUIET_POLL_LOGS and _is_quiet_get(record)),
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "django.server": {"handlers": ["console"], "filters": ["quiet_polls"], "propagate": False},
    },
}
