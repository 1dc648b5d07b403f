"""The workflow page: trajectory, checkpoints, decisions and events, bounded for 1,000-step trajectories."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.views.workflows import STEPS_PER_PAGE
from tests.helpers import make_checkpoint, make_step, make_user, make_worked_example, make_workflow, squeezed
from workflows.models import Decider, Step


def test_the_page_shows_the_trajectory_checkpoints_decisions_and_events(client, alice):
    workflow = make_worked_example(owner=make_user("olga"))
    checkpoint = make_checkpoint(workflow)
    checkpoint.claim(by=alice)
    decision = Decider(checkpoint).decide(by=alice, action="abort", instructions="customer withdrew")
    client.force_login(alice)

    html = squeezed(client.get(reverse("workflow", args=[workflow.pk])).content.decode())

    for text in (
        workflow.title,
        workflow.external_id,
        "olga",
        "read_ticket",
        "decide_refund",
        "issue_refund",
        "R-88",
        ":issue_refund",
        "✓ verified",
        "Promised to the user: “refund within 5 days”",
        f"#{checkpoint.pk} Model timeout",
        "at step 4",
        "Abort",
        f"by {decision.decided_by.username}",
        "claimed the checkpoint",
        "3 steps",
        reverse("workbench", args=[checkpoint.pk]),
    ):
        assert text in html, text


def test_inputs_and_outputs_are_collapsed_with_a_preview_and_escaped(client, alice):
    workflow = make_workflow(title="<script>alert('t')</script>")
    make_step(workflow, 1, "<b>tool</b>", output={"html": "<script>x()</script>", "big": "y" * 5000})
    client.force_login(alice)

    html = client.get(reverse("workflow", args=[workflow.pk])).content.decode()

    assert "<script>alert('t')</script>" not in html and "<script>x()</script>" not in html
    assert "&lt;script&gt;x()&lt;/script&gt;" in html and "&lt;b&gt;tool&lt;/b&gt;" in html
    assert '<details data-testid="step-output"><summary>Output <code class="preview">' in html
    assert "<details open" not in html  # collapsed until the operator expands
    assert "…</code>" in html  # the preview is one clipped line; the whole value is behind the expand


def test_a_thousand_step_trajectory_is_paged_with_the_same_number_of_queries(client, alice):
    small, large = make_workflow(), make_workflow()
    for workflow, n in ((small, STEPS_PER_PAGE), (large, 1000)):
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
    client.force_login(alice)
    counts = []
    for workflow in (small, large):
        with CaptureQueriesContext(connection) as queries:
            html = client.get(reverse("workflow", args=[workflow.pk])).content.decode()
        counts.append(len(queries))
        assert html.count('data-testid="step"') == STEPS_PER_PAGE

    assert counts[0] == counts[1]
    assert "1000 steps · steps 1–50" in squeezed(html) and "page 1 of 20" in html
    last = client.get(reverse("workflow", args=[large.pk]), {"page": 20}).content.decode()
    assert 'data-seq="1000"' in last and 'data-seq="950"' not in last


def test_go_to_step_opens_the_page_that_holds_it(client, alice):
    workflow = make_workflow()
    Step.objects.bulk_create(
        Step(workflow=workflow, seq=i, name=f"step_{i}", kind="tool", status="committed") for i in range(1, 201)
    )
    client.force_login(alice)

    html = client.get(reverse("workflow", args=[workflow.pk]), {"seq": 123}).content.decode()

    assert 'id="step-123"' in html and "page 3 of 4" in html


def test_htmx_paging_swaps_only_the_trajectory(client, alice):
    workflow = make_workflow()
    Step.objects.bulk_create(
        Step(workflow=workflow, seq=i, name=f"step_{i}", kind="tool", status="committed") for i in range(1, 120)
    )
    client.force_login(alice)

    html = client.get(
        reverse("workflow", args=[workflow.pk]), {"page": 2}, headers={"HX-Request": "true", "HX-Target": "trajectory"}
    ).content.decode()

    assert html.lstrip().startswith('<section class="panel" id="trajectory"')
    assert 'data-seq="51"' in html and "Event log" not in html


def test_queue_workbench_and_my_workflows_link_to_the_page(client, alice):
    owner = make_user("olga")
    workflow = make_worked_example(owner=owner)
    checkpoint = make_checkpoint(workflow)
    url = reverse("workflow", args=[workflow.pk])
    client.force_login(alice)
    assert url in client.get(reverse("queue")).content.decode()
    assert url in client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    client.force_login(owner)
    assert url in client.get(reverse("mine")).content.decode()


def test_tpms_read_the_page_and_strangers_log_in_first(client, tess):
    workflow = make_worked_example()
    assert client.get(reverse("workflow", args=[workflow.pk])).status_code == 302
    client.force_login(tess)
    assert client.get(reverse("workflow", args=[workflow.pk])).status_code == 200
    assert client.get(reverse("workflow", args=[workflow.pk + 999])).status_code == 404
