"""The queue: what it lists, in which order, its filters and counts, its partial."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_worked_example, make_workflow, squeezed
from workflows.models import Checkpoint


def _row_ids(response) -> list[int]:
    return [c.pk for c in response.context["checkpoints"]]


def test_the_queue_needs_a_login(client, db):
    response = client.get(reverse("queue"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_poll_after_the_session_ended_loads_the_login_page_instead_of_swapping_it(client, db):
    response = client.get(
        reverse("queue") + "?scope=mine", follow=True, headers={"HX-Request": "true", "HX-Target": "queue-table"}
    )

    assert response.status_code == 204
    assert response["HX-Redirect"] == reverse("login") + "?next=%2F%3Fscope%3Dmine"


def test_the_login_page_is_styled_and_signs_in(client, alice):
    page = client.get(reverse("login"))
    assert b"console.css" in page.content
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-" + "x" * 12})
    assert response.status_code == 302
    assert response["Location"] == reverse("queue")


def test_the_queue_lists_open_and_claimed_checkpoints_by_urgency(client, alice, bob):
    later = make_checkpoint()
    sooner = make_checkpoint()
    claimed = make_checkpoint()
    breached = make_checkpoint()
    resolved_workflow = make_checkpoint()
    now = timezone.now()
    Checkpoint.objects.filter(pk=later.pk).update(due_at=now + timedelta(minutes=50))
    Checkpoint.objects.filter(pk=sooner.pk).update(due_at=now + timedelta(minutes=5))
    Checkpoint.objects.filter(pk=claimed.pk).update(due_at=now + timedelta(minutes=20))
    Checkpoint.objects.filter(pk=breached.pk).update(due_at=now - timedelta(minutes=3), breached_at=now)
    Checkpoint.objects.filter(pk=resolved_workflow.pk).update(status="resolved")
    claimed.claim(by=bob)
    client.force_login(alice)

    response = client.get(reverse("queue"))

    assert _row_ids(response) == [breached.pk, sooner.pk, claimed.pk, later.pk]
    row = response.content.decode()
    assert "Refund for ticket" in row and "refund" in row and "Model timeout" in row
    assert 'data-due="' in row and 'data-warn="' in row


def test_each_row_shows_title_kind_agent_reason_assignee_and_age(client, alice, bob):
    agent, _ = make_agent("support-bot")
    checkpoint = make_checkpoint(make_worked_example(agent=agent))
    checkpoint.assign(to=bob, by=alice, note="needs finance eyes")
    client.force_login(alice)

    html = squeezed(client.get(reverse("queue")).content.decode())

    for text in (checkpoint.workflow.title, "support-bot", "Model timeout", "bob", "from alice: needs finance eyes"):
        assert text in html


def test_an_htmx_poll_renders_only_the_table_body_with_the_counts(client, alice):
    make_checkpoint()
    client.force_login(alice)

    response = client.get(
        reverse("queue") + "?reason=model_timeout", headers={"HX-Request": "true", "HX-Target": "queue-table"}
    )

    html = response.content.decode()
    assert html.lstrip().startswith('<tbody id="queue-table"')
    assert 'hx-trigger="every 3s"' in html
    assert 'hx-get="/?reason=model_timeout"' in html  # the filters stay in the polled URL
    assert 'id="queue-counts"' in html and 'hx-swap-oob="true"' in html
    assert "<header" not in html


@pytest.mark.parametrize(
    ("scope", "expected"), [("all", {"mine", "theirs", "free"}), ("mine", {"mine"}), ("unassigned", {"free"})]
)
def test_the_scope_filters_mine_unassigned_and_all(client, alice, bob, scope, expected):
    checkpoints = {name: make_checkpoint() for name in ("mine", "theirs", "free")}
    checkpoints["mine"].claim(by=alice)
    checkpoints["theirs"].claim(by=bob)
    client.force_login(alice)

    response = client.get(reverse("queue"), {"scope": scope})

    assert set(_row_ids(response)) == {checkpoints[name].pk for name in expected}


def test_filters_by_reason_agent_kind_and_breached(client, alice):
    agent, _ = make_agent("billing-bot")
    timeout = make_checkpoint(reason="model_timeout")
    tool = make_checkpoint(reason="tool_error")
    billing = make_checkpoint(make_workflow(agent, kind="invoice"), reason="rate_limit")
    Checkpoint.objects.filter(pk=tool.pk).update(breached_at=timezone.now())
    client.force_login(alice)

    def ids(**params) -> set[int]:
        return set(_row_ids(client.get(reverse("queue"), params)))

    assert ids(reason="tool_error") == {tool.pk}
    assert ids(agent="billing-bot") == {billing.pk}
    assert ids(kind="invoice") == {billing.pk}
    assert ids(breached="1") == {tool.pk}
    assert ids(reason="not-a-reason") == {timeout.pk, tool.pk, billing.pk}  # a stale link still renders


def test_counts_per_filter_follow_the_other_filters(client, alice, bob):
    for _ in range(3):
        make_checkpoint(reason="tool_error")
    mine = make_checkpoint(reason="tool_error")
    mine.claim(by=alice)
    theirs = make_checkpoint(reason="model_timeout")
    theirs.claim(by=bob)
    Checkpoint.objects.filter(pk=theirs.pk).update(breached_at=timezone.now())
    client.force_login(alice)

    tabs = {t["key"]: t["count"] for t in client.get(reverse("queue")).context["tabs"]}
    assert tabs == {"all": 5, "mine": 1, "unassigned": 3, "approval": 0, "breached": 1}

    tabs = {t["key"]: t["count"] for t in client.get(reverse("queue"), {"reason": "tool_error"}).context["tabs"]}
    assert tabs == {"all": 4, "mine": 1, "unassigned": 3, "approval": 0, "breached": 0}


def test_agent_text_is_escaped_in_the_queue(client, alice):
    workflow = make_worked_example()
    workflow.title = "<script>alert('title')</script>"
    workflow.kind = "<img src=x onerror=alert(1)>"
    workflow.save()
    make_checkpoint(workflow, detail="<script>alert('detail')</script>")
    client.force_login(alice)

    for headers in ({}, {"HX-Request": "true", "HX-Target": "queue-table"}):
        html = client.get(reverse("queue"), headers=headers).content.decode()
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert "&lt;script&gt;alert(&#x27;title&#x27;)&lt;/script&gt;" in html


def test_a_tpm_sees_the_queue_without_claim_buttons(client, tess):
    make_checkpoint()
    client.force_login(tess)

    html = client.get(reverse("queue")).content.decode()

    assert "Refund for ticket" in html
    assert 'data-testid="claim"' not in html
