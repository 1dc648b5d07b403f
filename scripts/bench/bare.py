"""The bare Django view: what Django and HTTP cost here, the limit no step report can beat.

    gunicorn -c python:console.gunicorn scripts.bench.bare:application

The same gunicorn settings as the console (console/gunicorn.py), the same database and persistent
connections, and nothing else: no app, no middleware, no authentication, stdlib ``json``, one
``INSERT … ON CONFLICT DO NOTHING`` of the step in autocommit (one statement, one commit). The ingest
section posts the same bodies to it as to the console, side by side in one run.
"""

from __future__ import annotations

import json
import os

import django
import environ
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import path

from .rows import INSERT_STEP

INSERT_OR_NOTHING = INSERT_STEP + " ON CONFLICT (workflow_id, seq) DO NOTHING"


def report_step(request: HttpRequest, workflow_id: int) -> HttpResponse:
    report = json.loads(request.body)
    with connection.cursor() as cursor:
        cursor.execute(
            INSERT_OR_NOTHING,
            (
                workflow_id,
                report["seq"],
                report["name"],
                report["kind"],
                report["status"],
                json.dumps(report["input"]),
                json.dumps(report["output"]),
                report["verified"],
                None,
                None,
                None,
            ),
        )
        created = cursor.rowcount == 1
    return HttpResponse(
        json.dumps({"seq": report["seq"]}), status=201 if created else 200, content_type="application/json"
    )


urlpatterns = [path("api/v1/workflows/<int:workflow_id>/steps", report_step)]

if not settings.configured:
    database = environ.Env.db_url_config(os.environ["DATABASE_URL"])
    database.update(CONN_MAX_AGE=int(os.environ.get("CONN_MAX_AGE", "60")), CONN_HEALTH_CHECKS=True)
    settings.configure(
        DEBUG=False,
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        DATABASES={"default": database},
        USE_TZ=True,
        SECRET_KEY=os.environ["SECRET_KEY"],
    )
    django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402 - after settings.configure

application = get_wsgi_application()
