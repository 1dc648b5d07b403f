"""The queue renders each row once per content (console/queue_rows.py): what a row shows is never stale, and
what differs per request (the CSRF token, the page's own path) is this request's."""

from __future__ import annotations

import re
from datetime import timedelta

import time_machine
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console.queue_rows import CACHE
from tests.helpers import make_checkpoint
from workflows.models import Checkpoint, Step


def _raw_row(html: str, pk: int) -> str:
    match = re.search(rf'<tr id="checkpoint-{pk}".*?</tr>', html, re.S)
    assert match, f"no row for checkpoint {pk}"
    return match.group(0)


def _row(html: str, pk: int) -> str:
    """The row, less its CSRF token: Django masks it afresh for every request."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', 'name="csrfmiddlewaretoken"', _raw_row(html, pk))


def test_an_unchanged_row_comes_from_memory_and_a_changed_one_is_rendered_again(client, alice, bob):
    checkpoint, other = make_checkpoint(), make_checkpoint()
    CACHE.clear()
    client.force_login(alice)
    frozen = time_machine.travel(timezone.now(), tick=False)  # a row says its age to the second: hold the clock
    frozen.start()

    first = client.get(reverse("queue")).content.decode()
    again = client.get(reverse("queue")).content.decode()
    assert CACHE.misses == 2 and CACHE.hits == 2
    assert _row(first, checkpoint.pk) == _row(again, checkpoint.pk)
    assert "unassigned" in _row(again, checkpoint.pk)

    assert checkpoint.claim(by=bob)
    after = client.get(reverse("queue")).content.decode()
    row = _row(after, checkpoint.pk)
    assert "bob" in row and "unassigned" not in row and 'data-testid="claim"' not in row
    assert _row(after, other.pk) == _row(first, other.pk)  # the other row did not change, nor its HTML

    client.force_login(bob)  # the same row, seen by the one who holds it
    mine = _row(client.get(reverse("queue")).content.decode(), checkpoint.pk)
    frozen.stop()
    assert "is-mine" in mine and ">you<" in mine and 'data-testid="undo-claim"' in mine


def test_the_row_forms_carry_this_requests_token_and_path_and_work(alice):
    checkpoint = make_checkpoint()
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    for _ in range(2):  # rendered, then from memory: the same holds both times
        page = client.get(reverse("queue") + "?kind=refund&per=25").content.decode()
        assert "\x00" not in page
        row = _raw_row(page, checkpoint.pk)
        tokens = re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', row)
        assert len(tokens) == 1
        assert 'name="next" value="/?kind=refund&amp;per=25"' in row
    response = client.post(
        reverse("claim", args=[checkpoint.pk]), {"csrfmiddlewaretoken": tokens[0], "next": "/?kind=refund&per=25"}
    )
    assert response.status_code == 302 and response["Location"] == "/?kind=refund&per=25"
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.CLAIMED and checkpoint.assignee_id == alice.pk


def test_what_moves_with_time_moves_on_a_kept_row(client, alice):
    checkpoint = make_checkpoint()
    Checkpoint.objects.filter(pk=checkpoint.pk).update(due_at=timezone.now() + timedelta(minutes=30))
    client.force_login(alice)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        before = _row(client.get(reverse("queue")).content.decode(), checkpoint.pk)
    with time_machine.travel(start + timedelta(seconds=1), tick=False):
        same_minute = _row(client.get(reverse("queue")).content.decode(), checkpoint.pk)
    with time_machine.travel(start + timedelta(minutes=10), tick=False):
        later = _row(client.get(reverse("queue")).content.decode(), checkpoint.pk)
    assert "29m left" in before or "30m left" in before
    assert before == same_minute or "29m left" in same_minute
    assert "19m left" in later or "20m left" in later
    assert "10m</td>" in later  # the age, too


def test_a_step_or_comment_that_changed_is_rendered_again_on_the_workbench(client, alice):
    """The workbench keeps its trajectory steps and event rows the same way (console/trajectory.py,
    console/event_rows.py): what changed shows at once."""
    checkpoint = make_checkpoint()
    step = checkpoint.workflow.steps.order_by("seq").first()
    client.force_login(alice)
    url = reverse("workbench", args=[checkpoint.pk])
    before = client.get(url).content.decode()
    Step.objects.filter(pk=step.pk).update(output={"answer": "changed-output-marker"})
    client.post(reverse("comment", args=[checkpoint.pk]), {"body": "a **new** comment-marker", "next": url})
    after = client.get(url).content.decode()

    assert "changed-output-marker" not in before and "changed-output-marker" in after
    assert "comment-marker" not in before and "<strong>new</strong> comment-marker" in after
