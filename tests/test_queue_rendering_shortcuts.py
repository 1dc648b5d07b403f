"""The queue's rendering shortcuts say exactly what the slower template built-ins said."""

from datetime import UTC, datetime

from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from console.templatetags.console_tags import iso, stamp
from console.views.queue import _reverser


def render(source: str, **context) -> str:
    return Template("{% load console_tags %}" + source).render(Context(context))


def test_iso_and_stamp_match_the_date_filter_in_any_time_zone(settings):
    for moment in (datetime(2026, 11, 30, 9, 5, 7, 123456, tzinfo=UTC), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)):
        for zone in ("UTC", "Europe/Berlin", "America/New_York"):
            with timezone.override(zone):
                assert iso(moment) == render("{{ d|date:'c' }}", d=moment)
                assert stamp(moment) == render("{{ d|date:'Y-m-d H:i:s' }}", d=moment)
    assert iso(None) == stamp(None) == ""


def test_the_reverser_builds_the_urls_reverse_builds():
    for name in ("workbench", "claim", "workflow"):
        build = _reverser(name)
        for pk in (1, 42, 9_876_543_210):
            assert build(pk) == reverse(name, args=[pk])
