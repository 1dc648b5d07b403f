"""Run the test provider: ``python -m tests.oidc_provider.serve PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI [PEOPLE]``.

Migrates its own SQLite database, registers the console as a confidential client (authorisation
code, RS256 ID tokens, no consent screen) and serves on 127.0.0.1:PORT until it is terminated.
PEOPLE, a JSON file ``[{"username", "password", "email", "groups": [...]}, ...]``, is who may sign in
from the start (``make run SSO=1`` seeds them through ``demo/sso.py``; the tests add theirs through
``/control/user``).
"""

import json
import os
import sys
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def seed(people: list[dict[str, Any]]) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    for person in people:
        user, _ = get_user_model().objects.get_or_create(username=person["username"])
        user.email = person.get("email", "")
        user.set_password(person["password"])
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in person.get("groups", [])])


def main() -> None:
    port, client_id, client_secret, redirect_uri = sys.argv[1:5]
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0)
    Application.objects.update_or_create(
        client_id=client_id,
        defaults={
            "name": "Recovery Console",
            "client_secret": client_secret,
            "redirect_uris": redirect_uri,
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "skip_authorization": True,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "algorithm": Application.RS256_ALGORITHM,
        },
    )
    if len(sys.argv) > 5:
        seed(json.loads(Path(sys.argv[5]).read_text()))
    server = make_server("127.0.0.1", int(port), get_wsgi_application(), handler_class=QuietHandler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
