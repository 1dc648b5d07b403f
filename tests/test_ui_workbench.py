"""The checkpoint workbench: the resume state in plain language, the trajectory, all of it escaped."""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.resume_summary import resume_summary
from tests.helpers import (
    make_checkpoint,
    make_runbook,
    make_step,
    make_user,
    make_worked_example,
    make_workflow,
    squeezed,
)
from workflows.models import Decider


def test_the_summary_reads_the_worked_example_in_plain_language(db):
    checkpoint = make_checkpoint()  # refund committed, then the model died before the ticket note

    texts = [item["text"] for item in resume_summary(checkpoint.resume_state)]

    assert texts == [
        "Refund R-88 of 42.00 EUR committed",
        "ticket note not written",
        "customer not notified",
        "promised: refund within 5 days",
    ]


def test_the_summary_flags_an_unknown_refund(db):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))

    items = resume_summary(checkpoint.resume_state)

    assert {"kind": "unknown", "text": "Refund of 42.00 EUR: outcome unknown"} in items
    assert not any(item["kind"] == "committed" for item in items)


def test_the_summary_survives_state_of_any_shape(db):
    assert resume_summary(None) == []
    assert (
        resume_summary(
            {"committed": "x", "unknown_effects": [1, None], "state": {"remaining": {"a": 1}}, "promises": "not a list"}
        )
        == []
    )


def test_the_workbench_shows_summary_trajectory_runbook_clock_and_events(client, alice):
    owner = make_user("olga")
    make_runbook(title="Refunds that stopped", body="Check the payment ledger first.", workflow_kind="refund")
    checkpoint = make_checkpoint(make_worked_example(owner=owner))
    checkpoint.claim(by=alice)
    client.force_login(alice)

    html = squeezed(client.get(reverse("workbench", args=[checkpoint.pk])).content.decode())

    for text in (
        "Refund R-88 of 42.00 EUR committed",
        "ticket note not written",
        "promised: refund within 5 days",
        "read_ticket",
        "decide_refund",
        "issue_refund",
        "✓ verified",
        "T-",
        ":issue_refund",
        "R-88",
        "Refunds that stopped",
        "Check the payment ledger first.",
        "https://runbooks.example/refunds",
        'data-testid="sla-clock"',
        "claimed the checkpoint",
        "opened the checkpoint (model timeout)",
        "Returns to <strong>olga</strong> when resumed",
        'data-testid="last-verified"',
        "write_ticket_note",
        '<details data-keep="in-',
    ):
        assert text in html, text


def test_agent_text_is_escaped_and_json_is_pretty_printed(client, alice):
    workflow = make_worked_example()
    workflow.title = "<script>alert('t')</script>"
    workflow.save()
    make_step(
        workflow,
        4,
        "<script>alert('step')</script>",
        "tool",
        output={"html": "<script>x()</script>", "n": 1},
        verified=True,
        promise="<b>soon</b>",
    )
    checkpoint = make_checkpoint(
        workflow,
        at_seq=5,
        detail="<img src=x onerror=alert(1)>",
        state={"remaining": ["<script>alert('r')</script>"], "note": "</pre><script>"},
    )
    client.force_login(alice)

    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()

    assert "<script>alert" not in html and "<script>x()" not in html and "</pre><script>" not in html
    assert "<img src=x" not in html and "<b>soon</b>" not in html
    assert "&lt;script&gt;alert(&#x27;step&#x27;)&lt;/script&gt;" in html
    # Indented JSON (PostgreSQL's jsonb may reorder the keys).
    assert "\n  &quot;html&quot;: &quot;&lt;script&gt;x()&lt;/script&gt;&quot;" in html
    assert "\n  &quot;n&quot;: 1" in html


def test_a_tpm_reads_the_workbench_but_gets_no_actions(client, tess):
    checkpoint = make_checkpoint()
    client.force_login(tess)

    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()

    assert 'data-testid="read-only"' in html
    assert 'data-testid="claim"' not in html and 'data-testid="decision-form"' not in html


def test_an_unknown_checkpoint_is_a_404(client, alice):
    client.force_login(alice)
    assert client.get(reverse("workbench", args=[999])).status_code == 404


def test_an_idempotency_key_named_like_a_dict_method_still_renders(client, alice):
    from tests.helpers import make_step, make_workflow

    workflow = make_workflow()
    make_step(workflow, 1, "charge", "effect", status="pending", idempotency_key="items", input={"amount": "1"})
    checkpoint = make_checkpoint(workflow, at_seq=2)
    Decider(checkpoint).decide(
        by=alice,
        action="resume",
        confirmations={"items": "happened"},
        confirmation_refs={"items": "CH-1"},
        money_confirmed=True,
    )
    client.force_login(alice)

    response = client.get(reverse("workbench", args=[checkpoint.pk]))

    assert response.status_code == 200
    assert "<code>items</code> happened · ref <code>CH-1</code>" in squeezed(response.content.decode())


def _long_workflow(n: int):
    """``n`` steps, each with its ``step_committed`` event, as an agent reporting them leaves it."""
    from tests.helpers import make_workflow
    from workflows.models import Event, Step

    workflow = make_workflow()
    Step.objects.bulk_create(
        Step(
            workflow=workflow,
            seq=i,
            name=f"step_{i}",
            kind="tool",
            status="committed",
            input={"i": i},
            output={"text": "z" * 2000, "i": i},
        )
        for i in range(1, n + 1)
    )
    Event.objects.bulk_create(
        Event(workflow=workflow, actor_type="agent", actor_agent=workflow.agent, verb="step_committed", data={"seq": i})
        for i in range(1, n + 1)
    )
    return workflow


def test_a_thousand_step_trajectory_shows_the_window_around_the_stop_at_the_cost_of_fifty(client, alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from console.views.checkpoints import AFTER_THE_STOP, WORKBENCH_EVENTS, WORKBENCH_STEPS

    client.force_login(alice)
    counts, pages = [], []
    for n in (WORKBENCH_STEPS, 1000):
        checkpoint = make_checkpoint(_long_workflow(n), at_seq=n - 200 if n > WORKBENCH_STEPS else n)
        with CaptureQueriesContext(connection) as queries:
            pages.append(client.get(reverse("workbench", args=[checkpoint.pk])).content.decode())
        counts.append(len(queries))
    short, long = pages

    assert short.count('data-testid="step"') == WORKBENCH_STEPS and 'data-testid="earlier-steps"' not in short
    assert long.count('data-testid="step"') == WORKBENCH_STEPS
    stop = 800
    first = stop - (WORKBENCH_STEPS - AFTER_THE_STOP) + 1
    assert f'data-seq="{first}"' in long and f'data-seq="{first - 1}"' not in long
    assert f'data-seq="{stop + AFTER_THE_STOP}"' in long and f'data-seq="{stop + AFTER_THE_STOP + 1}"' not in long
    assert 'is-stop" data-testid="step" data-seq="800"' in squeezed(long)  # the stop is in the window
    assert f"1000 steps · showing {first}–{stop + AFTER_THE_STOP}" in squeezed(long)
    assert f"{first - 1} earlier steps:" in long and f"?seq={first}" in long
    assert f"{1000 - stop - AFTER_THE_STOP} later steps:" in long and f"?seq={stop + AFTER_THE_STOP + 1}" in long
    assert counts[1] - counts[0] <= 2  # what follows the stop, what leads to it; never one query per step
    events = long.split('data-testid="event-log"')[1].split("</table>")[0]
    assert events.count("<tr>") == WORKBENCH_EVENTS and 'data-testid="all-events"' in long


def test_a_stop_near_the_start_of_a_long_trajectory_fills_the_window_with_what_came_after(client, alice):
    from console.views.checkpoints import WORKBENCH_STEPS

    checkpoint = make_checkpoint(_long_workflow(300), at_seq=3)
    client.force_login(alice)
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    assert html.count('data-testid="step"') == WORKBENCH_STEPS
    assert 'data-seq="1"' in html and f'data-seq="{WORKBENCH_STEPS}"' in html
    assert 'data-testid="earlier-steps"' not in html and f"{300 - WORKBENCH_STEPS} later steps:" in html


@pytest.mark.parametrize("at_seq", [None, 1, 7, 301, 589, 599, 650])
def test_the_window_counts_what_it_leaves_out_whatever_the_gaps_and_the_stop(db, at_seq):
    """Seqs need not be contiguous (here every other one, 2..600) and a checkpoint may name no step (the window
    then ends at the last) or one past the end: the window's counts agree with counting the steps themselves."""
    from console.views.checkpoints import WORKBENCH_STEPS, _trajectory_window
    from workflows.models import Step

    workflow = make_workflow()
    Step.objects.bulk_create(
        Step(workflow=workflow, seq=seq, name=f"step_{seq}", kind="tool", status="committed", input={}, output={})
        for seq in range(2, 601, 2)
    )
    checkpoint = make_checkpoint(workflow, at_seq=at_seq)
    window = _trajectory_window(workflow, checkpoint)
    seqs = [s.seq for s in window.steps]
    every = list(range(2, 601, 2))
    assert len(seqs) == WORKBENCH_STEPS and seqs == sorted(seqs) and set(seqs) <= set(every)
    assert window.total == len(every) and window.last_seq_overall == 600
    assert window.earlier == len([s for s in every if s < seqs[0]])
    assert window.later == len([s for s in every if s > seqs[-1]])
    anchor = at_seq or 600
    if any(s <= anchor for s in every):
        assert max(s for s in every if s <= anchor) in seqs  # the stop (or the step before it) is shown
