"""Issue 28 item 4, as a class: no page shows a stored status value (``handed_off``) or a raw ISO timestamp.

Every page a person reads is rendered over a history that has each kind of status (a workflow handed off,
a retried effect with its earlier attempt, a replay, a rejected and a failed decision), and its visible text
(not attributes, not agent data in ``<pre>``/``<code>``) is scanned."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_runbook, make_step, make_worked_example
from workflows.models import (
    Action,
    Agent,
    Checkpoint,
    Decider,
    Decision,
    Notification,
    Reason,
    ReplayRun,
    Workflow,
)
from workflows.models.runbooks import Action as RunbookAction

RAW_VALUES = sorted(
    {
        str(v)
        for enum in (
            Workflow.Status,
            Checkpoint.Status,
            Decision.Status,
            ReplayRun.Status,
            Action,
            RunbookAction,
            Notification.Kind,
            Reason,
        )
        for v in enum.values
        if "_" in v
    }
)
RAW = re.compile(r"\b(" + "|".join(RAW_VALUES) + r")\b")
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


class VisibleText(HTMLParser):
    SKIP = {"pre", "code", "script", "style", "textarea", "template"}

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.depth += tag in self.SKIP

    def handle_endtag(self, tag):
        self.depth -= tag in self.SKIP

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def visible(html: str) -> str:
    parser = VisibleText()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


@pytest.fixture
def history(alice, bob):
    make_runbook(workflow_kind="refund")
    handed = make_checkpoint()
    d = Decider(handed).decide(by=alice, action="handoff", new_owner=bob, instructions="call her")
    d.start_attempt()
    d.mark_succeeded()
    retried = make_worked_example(refund_status="failed")
    retried.steps.get(seq=3).retry()
    open_one = make_checkpoint(retried, reason=Reason.TOOL_ERROR)
    open_one.claim(by=alice)
    failing = make_checkpoint()
    f = Decider(failing).decide(by=alice, action="retry_step", instructions="again")
    f.start_attempt()
    f.mark_attempt_failed("boom", now=None)
    make_step(handed.workflow, 4, "write_ticket_note", "effect", status="pending")
    Agent.objects.filter(pk=handed.workflow.agent_id).update(
        replay_url="https://agent.example/replay", capabilities=["replay"]
    )
    ReplayRun.request(Workflow.objects.get(pk=handed.workflow_id), from_seq=1, to_seq=3, by=alice)
    return {"handed": handed, "open": open_one, "failing": failing}


def _pages(history):
    handed, open_one = history["handed"], history["open"]
    run = ReplayRun.objects.get()
    return [
        reverse("queue"),
        reverse("mine"),
        reverse("notifications"),
        reverse("search") + "?q=Refund",
        reverse("workbench", args=[handed.pk]),
        reverse("workbench", args=[open_one.pk]),
        reverse("workbench", args=[history["failing"].pk]),
        reverse("workflow", args=[handed.workflow_id]),
        reverse("workflow", args=[open_one.workflow_id]),
        reverse("replay", args=[run.pk]),
        reverse("resumes"),
        reverse("resume_workflows"),
        reverse("breach_review"),
        reverse("readiness"),
        reverse("staffing"),
        reverse("runbooks"),
    ]


@pytest.mark.django_db
def test_no_page_shows_a_stored_status_or_a_raw_iso_time(client, history, alice, bob, tess, adam):
    found = []
    for user in (alice, bob, tess, adam):
        client.force_login(user)
        for url in _pages(history):
            response = client.get(url)
            if response.status_code != 200:
                continue  # a page this role may not read
            text = visible(response.content.decode())
            found += [(user.username, url, m.group(0)) for m in (*RAW.finditer(text), *ISO.finditer(text))]
    assert not found, sorted({(url, raw) for _, url, raw in found})


@pytest.mark.django_db
def test_the_handed_off_workflow_reads_handed_off(client, history, alice):
    client.force_login(alice)
    html = client.get(reverse("workflow", args=[history["handed"].workflow_id])).content.decode()
    assert 'data-testid="workflow-status">workflow handed off<' in html
