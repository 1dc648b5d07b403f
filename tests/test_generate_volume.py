"""manage.py generate_volume: realistic volumes with COPY, consistent enough for the console to use."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count

from demo.volume import generate
from tests.helpers import make_user
from workflows.models import Checkpoint, Decision, Event, Step, Workflow

pytestmark = pytest.mark.postgres


def test_it_loads_every_kind_of_row_in_every_state(db):
    out = StringIO()
    call_command(
        "generate_volume",
        "--agents",
        "3",
        "--workflows",
        "300",
        "--steps",
        "1500",
        "--open",
        "120",
        "--decided",
        "30",
        "--resolved",
        "200",
        "--due",
        "10",
        "--seed",
        "7",
        stdout=out,
    )
    assert "seed 7" in out.getvalue() and "loaded" in out.getvalue()
    assert Workflow.objects.count() == 300
    assert Step.objects.count() == 1500
    statuses = set(Checkpoint.objects.values_list("status", flat=True))
    assert statuses == {"open", "claimed", "decided", "resolved"}
    assert Checkpoint.objects.open().count() == 120
    assert Checkpoint.objects.breached().open().exists()
    assert Checkpoint.objects.due().count() == 10
    assert {"queued", "succeeded"} <= set(Decision.objects.values_list("status", flat=True))
    assert Event.objects.filter(verb="step_committed").count() == 1500


def test_the_rows_keep_the_domain_constraints(db):
    generate(agents=2, workflows=100, steps=700, open_checkpoints=40, decided=10, resolved=50, seed=3)
    assert not Step.objects.filter(kind="effect", idempotency_key=None).exists()
    per_workflow = Workflow.objects.annotate(n=Count("steps"))
    for workflow in per_workflow[:20]:
        assert sorted(workflow.steps.values_list("seq", flat=True)) == list(range(1, workflow.n + 1))  # type: ignore[attr-defined]  # annotate(n=…)
    unresolved = Checkpoint.objects.unresolved().values("workflow").annotate(n=Count("pk"))
    assert all(row["n"] == 1 for row in unresolved)
    assert all(len(s.input["ticket"]) > 2 for s in Step.objects.all()[:20])  # JSON payloads, not strings


def test_ids_continue_after_a_load_so_the_console_keeps_working(db, alice, client):
    generate(agents=2, workflows=50, steps=100, open_checkpoints=20, decided=0, resolved=0, seed=5)
    generate(agents=2, workflows=50, steps=100, open_checkpoints=20, decided=0, resolved=0, seed=6)
    workflow = Workflow.objects.first()
    assert Step.objects.create(workflow=workflow, seq=999, name="extra", kind="tool", status="pending")
    client.force_login(alice)
    page = client.get("/?per=25")
    assert page.status_code == 200
    assert page.content.count(b'data-testid="queue-row"') == 25


def test_it_refuses_more_unresolved_checkpoints_than_workflows(db):
    make_user("someone")
    with pytest.raises(CommandError, match="at most one unresolved checkpoint"):
        call_command("generate_volume", "--workflows", "10", "--steps", "10", "--open", "20", stdout=StringIO())


def test_a_breach_history_is_in_time_order_with_about_one_breach_in_ten_and_the_review_reads_it(client, tess):
    from datetime import timedelta

    from django.urls import reverse
    from django.utils import timezone

    from demo.volume import generate_breach_history

    volume = generate_breach_history(checkpoints=600, days=20, open_now=10, seed=7)
    assert volume.checkpoints["decided"] == 600 and volume.checkpoints["open"] == 10
    assert 30 <= volume.checkpoints["breached"] <= 110
    opened = list(Checkpoint.objects.filter(status="resolved").order_by("pk").values_list("opened_at", flat=True))
    assert opened == sorted(opened) and opened[0] >= timezone.now() - timedelta(days=20)
    decided = Checkpoint.objects.filter(status="resolved", decisions__isnull=False).distinct().count()
    assert decided == 600 and not Checkpoint.objects.filter(status="resolved", first_decision_at__isnull=True)
    assert Checkpoint.objects.filter(breached_at__isnull=False, escalations_fired__gt=0).exists()
    assert Event.objects.filter(verb="escalated").count() == sum(
        Checkpoint.objects.values_list("escalations_fired", flat=True)
    )
    client.force_login(tess)
    page = client.get(reverse("breach_review")).content.decode()
    assert page.count('data-testid="breach-row"') == 50 and 'data-testid="breach-next"' in page
