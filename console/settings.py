"""Settings, read from the environment once (django-environ).

The embedded default (no variables set) is SQLite plus kombu's filesystem
transport under ``var/``: one machine, no servers. Production sets
``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL`` (Redis).
"""

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")  # real environment variables win

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is off (see .env.example).")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"  # noqa: S105
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

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
    "workflows",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "workflows.api_middleware.ApiBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.notification_views.unread_notifications",
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
        {"timeout": 20, "transaction_mode": "IMMEDIATE",
         "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
    )
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
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

SESSION_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- Agent API -------------------------------------------------------------
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=1024 * 1024)
API_RATE_LIMIT_PER_MINUTE = env.int("API_RATE_LIMIT_PER_MINUTE", default=1200)
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
# Where deliveries may go (workflows/runtime.py): https only, and no loopback, private or link-local
# targets, unless DEBUG; the networks listed in DELIVERY_ALLOWED_NETWORKS (CIDR) are allowed anyway.
DELIVERY_REQUIRE_HTTPS = env.bool("DELIVERY_REQUIRE_HTTPS", default=not DEBUG)
DELIVERY_REFUSE_PRIVATE_ADDRESSES = env.bool("DELIVERY_REFUSE_PRIVATE_ADDRESSES", default=not DEBUG)
DELIVERY_ALLOWED_NETWORKS = env.list("DELIVERY_ALLOWED_NETWORKS", default=[])
# How often the outbox relay and the sweeps run (Celery beat and the relay loop).
SWEEP_INTERVAL_SECONDS = env.float("SWEEP_INTERVAL_SECONDS", default=5.0)
# A workflow whose agent says nothing for this long gets a checkpoint (per agent override).
AGENT_SILENCE_SECONDS = env.int("AGENT_SILENCE_SECONDS", default=900)
# Replays (issue 11): bounded in range, request size, concurrency per agent and time.
REPLAY_MAX_STEPS = env.int("REPLAY_MAX_STEPS", default=50)
REPLAY_MAX_REQUEST_BYTES = env.int("REPLAY_MAX_REQUEST_BYTES", default=1_048_576)
REPLAY_MAX_CONCURRENT_PER_AGENT = env.int("REPLAY_MAX_CONCURRENT_PER_AGENT", default=2)
REPLAY_TIMEOUT_SECONDS = env.float("REPLAY_TIMEOUT_SECONDS", default=30.0)
REPLAY_DEADLINE_SECONDS = env.int("REPLAY_DEADLINE_SECONDS", default=300)

# --- Notifications (SLA warnings, breaches, escalations, reminders) -----------
# Links in emails and webhooks point here.
CONSOLE_URL = env.str("CONSOLE_URL", default="http://127.0.0.1:8000")
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

# --- Celery ----------------------------------------------------------------
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL == "filesystem://":
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
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 120
CELERY_TASK_SOFT_TIME_LIMIT = 90
# Timers are data (indexed deadline columns); one periodic sweep applies them with conditional updates.
CELERY_BEAT_SCHEDULE = {"sweep": {"task": "workflows.tasks.sweep", "schedule": SWEEP_INTERVAL_SECONDS}}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = TIME_ZONE

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
