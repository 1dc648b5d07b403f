"""The postmortem draft an operator downloads from the incident page: summary, the times to detect, hold and
recover, the timeline, the blast radius, decisions and rollout waves, the four outcome shares over its members,
SLA breaches and an empty action-items section — with every agent-supplied string inert in Markdown."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from markdown_it import MarkdownIt

from console.postmortem import md
from tests.helpers import make_agent, make_checkpoint, make_step, make_worked_example
from workflows import incident_figures
from workflows.models import Checkpoint, Decider, Incident, Rollout
from workflows.tasks import record_sla

pytestmark = pytest.mark.django_db

HOSTILE = (
    "provider 502 for {i}\n# Injected heading\n\n[click me](https://evil.example/x) <img src=x onerror=alert(1)> "
    "| a | cell | **bold** www.evil.example ![pic](https://evil.example/p.png) <script>alert(1)</script>"
)


def _render(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").enable("strikethrough").render(markdown)


def _seeded_incident(alice):
    agent = make_agent("pm-bot")[0]
    agent.incident_threshold = 4
    agent.save()
    for i in range(4):
        make_checkpoint(make_worked_example(agent=agent), reason="tool_error", detail=HOSTILE.format(i=f"T-{i}"))
    incident = Incident.objects.get()
    incident.hold(by=alice, note="stop the bleeding")
    incident.add_note("Vendor says: [fixed](https://evil.example) <script>alert(1)</script>\n## done", by=alice)
    # One member resumed by a rollout's canary, then completed by its agent (the promise kept by a message).
    rollout = Rollout.start(incident, action="resume", by=alice, canary_percent=25)
    assert rollout.advance()
    rollout.refresh_from_db()
    [resumed_pk] = rollout.waves[0]["checkpoints"]
    # One aborted by hand.
    other = incident.members.exclude(pk=resumed_pk).order_by("pk").first()
    decider = Decider(other)
    decider.record(decider.draft(action="abort", instructions="stop"), by=alice)
    for checkpoint in Checkpoint.objects.filter(pk__in=[resumed_pk, other.pk]):
        decision = checkpoint.decisions.get()
        assert decision.start_attempt() and decision.mark_succeeded()
    resumed = Checkpoint.objects.get(pk=resumed_pk).workflow
    make_step(resumed, 4, "notify_customer", "message", input={"text": "refund within 5 days"})
    assert resumed.finish("completed", "done", actor=agent)
    # One breaches its SLA, as the sweep records it.
    late = incident.members.exclude(status=Checkpoint.Status.RESOLVED).order_by("pk").first()
    Checkpoint.objects.filter(pk=late.pk).update(due_at=timezone.now() - timedelta(minutes=1))
    record_sla()
    return incident, rollout, agent


def _section(markdown: str, title: str) -> str:
    return markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_download_is_markdown_with_every_section_on_seeded_data(client, alice):
    incident, rollout, agent = _seeded_incident(alice)
    client.force_login(alice)
    page = client.get(reverse("incident", args=[incident.pk])).content.decode()
    assert reverse("incident_postmortem", args=[incident.pk]) in page
    response = client.get(reverse("incident_postmortem", args=[incident.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="incident-{incident.pk}-postmortem.md"'
    text = response.content.decode()

    headings = re.findall(r"^#{1,6} .*$", text, re.M)
    assert headings == [
        f"# Postmortem draft: incident {incident.pk}",
        "## Summary",
        "## Time to detect, hold and recover",
        "## Timeline (UTC)",
        "## Blast radius",
        "### Money at stake",
        "### Promises made to users",
        "## Decisions and rollout waves",
        f"### Rollout {rollout.pk}: resume, running",
        "## Outcomes",
        "## SLA breaches",
        "## Action items",
    ]
    summary = _section(text, "Summary")
    assert "- **Members:** 4 checkpoints of 4 workflows, 4 tickets; 1 still waiting for a decision" not in summary
    assert "- **Members:** 4 checkpoints of 4 workflows, 4 tickets; 2 still waiting for a decision" in summary
    assert "- **Commander:** nobody" in summary and "pm-bot" in summary

    times = incident_figures.Times.of(incident)
    assert times.held_at is not None and times.recovered_at is None  # two members still wait
    timings = _section(text, "Time to detect, hold and recover")
    assert "| not recovered yet |" in timings and "never held" not in timings

    timeline = _section(text, "Timeline (UTC)")
    assert "first member arrived" in timeline and "last member arrived" in timeline
    assert "put pm-bot on hold" in timeline and md("rollout wave 1 sent: 1 decisions") in timeline
    assert "decided abort on checkpoint" in timeline and "decided resume on checkpoint" in timeline

    radius = _section(text, "Blast radius")
    assert "| EUR | 168.00 | — | — |" in radius  # four refunds of 42.00 committed, nothing pending or planned
    assert "- refund within 5 days × 4" in radius

    waves = _section(text, "Decisions and rollout waves")
    assert "| abort | succeeded | 1 |" in waves and "| resume | succeeded | 1 |" in waves
    assert re.search(r"^\| 1 \| [\d\- :]+ \| 1 \| 0 \| 1 \|$", waves, re.M), waves  # the canary: settled, not failed

    outcomes = _section(text, "Outcomes")
    assert "| Resumed without data loss | 50 % | 1 of 2 |" in outcomes
    assert "| Completed after interruption | 50 % | 1 of 2 |" in outcomes
    assert "| Preserved a user-visible checkpoint | 100 % | 4 of 4 |" in outcomes

    breaches = _section(text, "SLA breaches")
    assert "1 of its members breached their SLA." in breaches

    assert text.rstrip().endswith("## Action items\n\n| Action | Owner | Due |\n| --- | --- | --- |")


def test_agent_text_cannot_inject_headings_links_images_html_or_table_cells(client, alice):
    incident, _rollout, _agent = _seeded_incident(alice)
    client.force_login(alice)
    text = client.get(reverse("incident_postmortem", args=[incident.pk])).content.decode()
    html = _render(text)
    assert "injected heading" in text and md("## done") in text  # the detail pattern and the note are there
    assert "<a " not in html and "<img" not in html and "<script" not in html and "<strong>bold" not in html
    assert "<h1>Injected" not in html and "<h2>done" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as the text it is
    # Every table row keeps its column count: a "|" in agent text makes no cell.
    for table in re.findall(r"<table>.*?</table>", html, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
        widths = {len(re.findall(r"<t[hd]", row)) for row in rows}
        assert len(widths) == 1, table


def test_md_escapes_every_markdown_and_html_opening_and_keeps_one_line():
    hostile = "# h\n- item\r\n1. one > quote `code` <b>x</b> [l](u) a|b *e* _e_ ~s~ \\ &amp;"
    out = md(hostile)
    assert "\n" not in out and "\r" not in out
    assert (
        _render(out).strip() == "<p>" + "# h - item 1. one &gt; quote `code` &lt;b&gt;x&lt;/b&gt; [l](u) a|b *e* _e_ "
        "~s~ \\ &amp;amp;" + "</p>"
    )
    assert md("x" * 600, limit=10) == "x" * 9 + "…"


def test_the_times_are_measured_from_the_first_arrival_and_recovery_needs_every_member(alice):
    agent = make_agent()[0]
    agent.incident_threshold = 2
    agent.save()
    first = make_checkpoint(make_worked_example(agent=agent), reason="tool_error", detail="502 for T-1")
    second = make_checkpoint(make_worked_example(agent=agent), reason="tool_error", detail="502 for T-2")
    incident = Incident.objects.get()
    start = timezone.now() - timedelta(minutes=30)
    Checkpoint.objects.filter(pk=first.pk).update(opened_at=start)
    Incident.objects.filter(pk=incident.pk).update(opened_at=start + timedelta(minutes=4))
    incident.refresh_from_db()
    hold = incident.hold(by=alice)
    type(hold).objects.filter(pk=hold.pk).update(placed_at=start + timedelta(minutes=10))
    times = incident_figures.Times.of(incident)
    assert (times.to_detect, times.to_hold, times.to_recover) == (240.0, 600.0, None)
    for checkpoint in (first, second):
        decider = Decider(checkpoint)
        decider.record(decider.draft(action="abort"), by=alice)
        decision = checkpoint.decisions.get()
        assert decision.start_attempt() and decision.mark_succeeded()
    Checkpoint.objects.filter(pk=second.pk).update(resolved_at=start + timedelta(minutes=25))
    Checkpoint.objects.filter(pk=first.pk).update(resolved_at=start + timedelta(minutes=20))
    times = incident_figures.Times.of(incident)
    assert times.to_recover == 25 * 60.0
