"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit in its own process.

``tests/test_sso.py`` starts it on loopback (``serve.py``) with its own SQLite file and a freshly
generated RSA key, both passed in the environment. It is a second Django project: nothing here is
imported by the console.
"""

import os
from pathlib import Path

SECRET_KEY = "oidc-test-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions", "oauth2_provider"]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "tests.oidc_provider.views.TamperMiddleware",
]
ROOT_URLCONF = "tests.oidc_provider.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
LOGIN_URL = "/login/"
# Cookies are per host, not per port: beside a console on the same 127.0.0.1 (make run SSO=1), the
# provider's session must not overwrite the console's (which holds the sign-in's state and nonce).
SESSION_COOKIE_NAME = "idp_sessionid"
CSRF_COOKIE_NAME = "idp_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # test users only: fast
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OIDC_PROVIDER_KEY"]).read_text(),
    "OIDC_ISS_ENDPOINT": os.environ["OIDC_PROVIDER_ISSUER"],
    "PKCE_REQUIRED": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.views.GroupsValidator",
    "SCOPES": {"openid": "OpenID Connect", "email": "E-mail", "profile": "Profile", "groups": "Groups"},
}
