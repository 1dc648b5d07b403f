"""The pause surface marks a drilled checkpoint (issue 26): announced drills for everyone; an unannounced
drill is hidden from operators until the checkpoint is decided, and TPMs always see it. SLA clocks run."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.helpers import make_agent, make_checkpoint, make_worked_example
from tests.test_drills import drilling_agent
from workflows.models import Checkpoint, Drill, Workflow

pytestmark = pytest.mark.django_db

BADGE = 'data-testid="drill-badge"'


def drilled_checkpoint(*, announced: bool) -> Checkpoint:
    agent, _ = make_agent()
    drill = Drill.objects.create(
        agent=agent, name="crash", fault=Drill.Fault.CRASH_AFTER_STEP, runs=1, announced=announced
    )
    workflow = make_worked_example(agent=agent)
    Workflow.objects.filter(pk=workflow.pk).update(drill=drill)
    return make_checkpoint(Workflow.objects.get(pk=workflow.pk))


def pages(user, checkpoint: Checkpoint) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    return {
        url: client.get(url).content.decode()
        for url in ("/", f"/checkpoints/{checkpoint.pk}/", f"/workflows/{checkpoint.workflow_id}/")
    }


def test_an_announced_drill_is_marked_for_operators_and_tpms_everywhere(alice, tess):
    checkpoint = drilled_checkpoint(announced=True)
    for user in (alice, tess):
        for url, html in pages(user, checkpoint).items():
            assert BADGE in html, (user, url)


def test_an_unannounced_drill_is_hidden_from_operators_until_decided_and_always_shown_to_tpms(alice, tess):
    checkpoint = drilled_checkpoint(announced=False)
    for url, html in pages(alice, checkpoint).items():
        assert BADGE not in html, url
        assert "unannounced" not in html and "drill" not in html.split("<main", 1)[-1].lower(), url
    for url, html in pages(tess, checkpoint).items():
        assert BADGE in html and "(unannounced)" in html, url
    assert checkpoint.claim(by=alice)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(status=Checkpoint.Status.DECIDED)
    for url, html in pages(alice, Checkpoint.objects.get(pk=checkpoint.pk)).items():
        if url != "/":  # a decided checkpoint leaves the queue
            assert BADGE in html, url


def test_a_drilled_checkpoint_runs_its_sla_clocks_like_any_other():
    checkpoint = drilled_checkpoint(announced=False)
    assert checkpoint.due_at is not None and checkpoint.due_at > checkpoint.opened_at


def test_a_production_checkpoint_carries_no_badge(alice, tess):
    checkpoint = make_checkpoint()
    for user in (alice, tess):
        for html in pages(user, checkpoint).values():
            assert BADGE not in html


def test_an_unannounced_drills_own_events_are_hidden_from_operators_as_its_badge_is(alice, tess):
    """Picked by the API's enlist path and journalled at its fault, the run's event log says "picked for a drill"
    and "journalled its state at the drill's fault": operators must not read that before the decision."""
    bot = drilling_agent()
    drill = Drill(agent=bot.agent, name="crash", fault=Drill.Fault.CRASH_AFTER_STEP, at_seq=1, runs=1, announced=False)
    drill.full_clean()
    drill.save()
    assert drill.start()
    wf = bot.create_workflow("T-1")["id"]
    bot.report(wf, 1, "read_ticket")
    assert Drill.record_journal(Workflow.objects.get(pk=wf), {"committed": [], "pending": None, "promises": []})
    checkpoint = Checkpoint.objects.get(pk=bot.open_checkpoint(wf)["id"])
    told = ("picked for a drill", "journalled its state")

    for url, html in pages(alice, checkpoint).items():
        assert not any(words in html for words in told), url
    for url, html in pages(tess, checkpoint).items():
        if url != "/":  # the queue shows no event log
            assert all(words in html for words in told), url
    Checkpoint.objects.filter(pk=checkpoint.pk).update(status=Checkpoint.Status.DECIDED)
    for url, html in pages(alice, Checkpoint.objects.get(pk=checkpoint.pk)).items():
        if url != "/":
            assert all(words in html for words in told), url
