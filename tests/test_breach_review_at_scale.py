"""The breach review stays bounded with a million checkpoints behind it: its timings are computed in the
database (PostgreSQL's percentile_cont / percentile_disc, elsewhere by rank), equal to the Python definition
in workflows.metrics on the same data, and every query the page makes reads an index of the big tables."""

import random
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_checkpoint, make_overdue_checkpoint, make_policy, make_runbook, make_workflow
from workflows import metrics, tasks, timings
from workflows.models import BreachReason, Checkpoint, Decider, Decision, EscalationLevel

SEED = 9031


def python_timings(filters: metrics.Filters) -> tuple[timings.Timing, timings.Timing]:
    """The definition as it was computed before the database did it: every pair read into Python."""
    rows = list(
        timings.with_clocks(timings.opened_checkpoints(filters)).values_list(
            "opened_at", "claimed_first_at", "first_decided_at"
        )
    )
    claim = [(c - o).total_seconds() for o, c, _ in rows if c is not None]
    decision = [(d - o).total_seconds() for o, _, d in rows if d is not None]
    return timings.Timing.of("Time to claim", claim), timings.Timing.of("Time to decision", decision)


@pytest.mark.parametrize("decided", [7, 8])  # odd and even counts of both clocks (one more is claimed)
def test_timings_computed_by_the_database_equal_the_python_definition(decided, alice):
    seed = SEED + decided
    print(f"seed {seed}")
    rng = random.Random(seed)
    start = timezone.now() - timedelta(hours=6)
    checkpoints = []
    for i in range(decided + 2):  # the last one stays open, the one before is claimed but not decided
        opened = start + timedelta(microseconds=rng.randrange(10**9))
        with time_machine.travel(opened, tick=False):
            checkpoint = make_checkpoint(make_workflow())
        claimed = opened + timedelta(microseconds=rng.randrange(1, 2 * 10**9))
        if i <= decided:
            with time_machine.travel(claimed, tick=False):
                assert checkpoint.claim(by=alice)
        if i < decided:
            with time_machine.travel(claimed + timedelta(microseconds=rng.randrange(1, 3 * 10**9)), tick=False):
                Decider(checkpoint).decide(by=alice, action="abort", instructions="seeded")
        checkpoints.append(checkpoint)
    decided_at = {d.checkpoint_id: d.decided_at for d in Decision.objects.all()}
    assert {c.pk: c.first_decision_at for c in Checkpoint.objects.filter(pk__in=decided_at)} == decided_at
    # Rows from before checkpoints stamped their first claim and decision: the claim event and the decision count.
    Checkpoint.objects.filter(pk=checkpoints[0].pk).update(first_claimed_at=None, first_decision_at=None)

    filters = metrics.Filters.last()
    claim, decision = timings.time_to_claim(filters), timings.time_to_decision(filters)
    assert (claim.count, decision.count) == (decided + 1, decided)
    assert (claim, decision) == python_timings(filters)


def test_an_even_count_has_its_median_halfway_between_the_middle_two_and_p90_is_the_nearest_rank(alice):
    opened = timezone.now() - timedelta(hours=1)
    for seconds in (300, 60, 180, 120):
        with time_machine.travel(opened, tick=False):
            checkpoint = make_checkpoint(make_workflow())
        with time_machine.travel(opened + timedelta(seconds=seconds), tick=False):
            Decider(checkpoint).decide(by=alice, action="abort", instructions="timed")
    decision = timings.time_to_decision(metrics.Filters.last())
    assert (decision.count, decision.median, decision.p90) == (4, 150.0, 300.0)
    assert timings.time_to_decision(metrics.Filters.last().previous()) == timings.Timing(
        "Time to decision", 0, None, None
    )


def test_the_python_median_is_the_mean_of_the_middle_two_to_the_last_bit_or_one():
    import statistics

    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for _ in range(500):
        values = [rng.randrange(10**12) / 10**6 for _ in range(rng.randrange(1, 12))]
        assert timings.median(values) == pytest.approx(statistics.median(values), rel=1e-15, abs=1e-9)
    assert timings.median([]) is None and timings.median([3.0, 1.0]) == 2.0


def breached_checkpoints(n: int, tess, *, kinds=("refund", "ticket_triage")) -> None:
    policy = make_policy(target=30, warning=10)
    EscalationLevel.objects.create(policy=policy, delay_minutes=5, notify=True, user=tess)
    make_runbook(workflow_kind=kinds[0], policy=policy, slug=f"{kinds[0]}-runbook")
    late, _ = BreachReason.objects.get_or_create(name="Late shift")
    for i in range(n):
        checkpoint = make_overdue_checkpoint(make_workflow(kind=kinds[i % len(kinds)]))
        tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=20))
        if i % 3 == 0:
            checkpoint.explain_breach(reason=late, note="", by=tess)


def review_queries(client) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("breach_review")).status_code == 200
    return [q["sql"] for q in ctx.captured_queries]


def test_the_page_makes_the_same_queries_whatever_the_number_of_breaches(client, tess):
    breached_checkpoints(2, tess)
    client.force_login(tess)
    review_queries(client)  # warm: the session and content types
    few = review_queries(client)
    breached_checkpoints(12, tess, kinds=("billing_dispute", "order_change", "account_recovery"))
    many = review_queries(client)
    assert len(many) == len(few)
    page = client.get(reverse("breach_review")).content.decode()
    assert page.count('data-testid="breach-row"') == 14


BIG_TABLES = ("workflows_checkpoint", "workflows_event", "workflows_decision", "workflows_workflow", "workflows_step")


@pytest.mark.postgres
def test_every_query_of_the_page_reads_the_big_tables_through_an_index(client, tess):
    """With sequential scans priced out, a plan still scans a table only when no index can serve the query."""
    breached_checkpoints(6, tess)
    client.force_login(tess)
    client.get(reverse("breach_review"))
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("breach_review"), {"kind": "refund", "runbook": "refund-runbook"}).status_code == 200
        assert client.get(reverse("breach_review")).status_code == 200
    scans = []
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        for query in ctx.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            scans += [f"{table}: {sql[:160]}" for table in BIG_TABLES if f"Seq Scan on {table}" in plan]
        cursor.execute("RESET enable_seqscan")
    assert scans == []
