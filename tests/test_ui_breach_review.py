"""The TPM breach review: breached checkpoints of a period with their overrun, filters kept in the URL,
a breach reason from the admins' list plus free text, and the same rows as CSV."""

import csv
import io
import re
from datetime import timedelta
from html import unescape

import time_machine
from django.urls import reverse
from django.utils import timezone

from console.views import breaches as breach_views
from tests.helpers import make_checkpoint, make_overdue_checkpoint, make_policy, make_runbook, make_workflow
from workflows import tasks
from workflows.models import BreachReason, Decider, EscalationLevel, Event


def breached(**workflow):
    checkpoint = make_overdue_checkpoint(make_workflow(**workflow) if workflow else None)
    tasks.sweep_clocks(checkpoint.due_at + timedelta(minutes=20))
    checkpoint.refresh_from_db()
    return checkpoint


def test_tpms_and_admins_get_the_page_in_their_navigation_operators_do_not(client, tess, alice):
    client.force_login(tess)
    assert 'data-testid="nav-breaches"' in client.get(reverse("queue")).content.decode()
    assert client.get(reverse("breach_review")).status_code == 200
    client.force_login(alice)
    assert 'data-testid="nav-breaches"' not in client.get(reverse("queue")).content.decode()
    assert client.get(reverse("breach_review")).status_code == 403


def test_a_breached_checkpoint_is_listed_with_its_overrun_and_escalations(client, tess, adam, alice):
    policy = make_policy(target=30, warning=10)
    EscalationLevel.objects.create(policy=policy, delay_minutes=5, notify=True, user=adam)
    make_runbook(workflow_kind="refund", policy=policy, slug="refunds")
    checkpoint = breached()
    with time_machine.travel(checkpoint.due_at + timedelta(minutes=42), tick=False):
        Decider(checkpoint).decide(by=alice, action="abort", instructions="late")
    on_time = make_checkpoint()
    client.force_login(tess)
    page = client.get(reverse("breach_review")).content.decode()
    assert f'data-id="{checkpoint.pk}"' in page and f'data-id="{on_time.pk}"' not in page
    assert 'data-testid="overrun">42m<' in page
    assert 'data-testid="escalations">1<' in page
    assert reverse("workbench", args=[checkpoint.pk]) in page


def test_filters_live_in_the_url_and_the_csv_honours_them(client, tess):
    refund = breached(kind="refund")
    triage = breached(kind="ticket_triage")
    client.force_login(tess)
    page = client.get(reverse("breach_review"), {"kind": "ticket_triage"}).content.decode()
    assert f'data-id="{triage.pk}"' in page and f'data-id="{refund.pk}"' not in page
    response = client.get(reverse("breach_review"), {"kind": "ticket_triage", "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [int(r["checkpoint"]) for r in rows] == [triage.pk]
    assert rows[0]["due_at"] == triage.due_at.isoformat() == rows[0]["breached_at"]
    old = client.get(reverse("breach_review"), {"start": "2020-01-01", "end": "2020-01-31"}).content.decode()
    assert 'data-testid="breach-row"' not in old


def test_a_tpm_records_a_breach_reason_from_the_list_and_free_text(client, tess):
    checkpoint = breached()
    staffing = BreachReason.objects.create(name="Understaffed shift")
    client.force_login(tess)
    response = client.post(
        reverse("explain_breach", args=[checkpoint.pk]),
        {"reason": staffing.pk, "note": "two operators off sick", "next": "?kind=refund"},
    )
    assert response.status_code == 302 and response["Location"].endswith("?kind=refund")
    checkpoint.refresh_from_db()
    assert checkpoint.breach_reason == staffing and checkpoint.breach_note == "two operators off sick"
    assert Event.objects.get(checkpoint=checkpoint, verb="breach_explained").actor_user == tess
    only_staffing = client.get(reverse("breach_review"), {"reason": "Understaffed shift"}).content.decode()
    assert f'data-id="{checkpoint.pk}"' in only_staffing
    unexplained = client.get(reverse("breach_review"), {"reason": "none"}).content.decode()
    assert f'data-id="{checkpoint.pk}"' not in unexplained


def test_a_reason_needs_a_choice_or_words_and_only_breached_checkpoints_take_one(client, tess):
    checkpoint = breached()
    on_time = make_checkpoint()
    client.force_login(tess)
    client.post(reverse("explain_breach", args=[checkpoint.pk]), {"reason": "", "note": ""})
    checkpoint.refresh_from_db()
    assert checkpoint.breach_note == "" and checkpoint.breach_reason is None
    client.post(reverse("explain_breach", args=[on_time.pk]), {"note": "nothing to explain"})
    on_time.refresh_from_db()
    assert on_time.breach_note == ""


def test_agent_text_cannot_become_a_spreadsheet_formula(client, tess):
    checkpoint = breached()
    checkpoint.workflow.__class__.objects.filter(pk=checkpoint.workflow_id).update(title='=HYPERLINK("http://x")')
    client.force_login(tess)
    response = client.get(reverse("breach_review"), {"format": "csv"})
    [row] = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert row["workflow"].startswith("'=")


def test_pages_walk_back_through_older_breaches(client, tess, monkeypatch):
    checkpoints = [breached() for _ in range(3)]  # breached in this order: the first is the oldest
    monkeypatch.setattr(breach_views, "PAGE", 2)
    client.force_login(tess)
    first = client.get(reverse("breach_review")).content.decode()
    assert first.count('data-testid="breach-row"') == 2 and 'data-testid="breach-next"' in first
    older = unescape(re.search(r'href="(\?[^"]*before=[^"]*)" data-testid="breach-next"', first).group(1))
    second = client.get(reverse("breach_review") + older).content.decode()
    assert second.count('data-testid="breach-row"') == 1
    assert f'data-id="{checkpoints[0].pk}"' in second


def _card(page: str, slug: str) -> str:
    return unescape(re.sub(r"\s+", " ", page.split(f'data-testid="card-{slug}"')[1].split("</article>")[0]))


def test_the_cards_count_met_and_breached_decisions_against_the_previous_period(client, tess, alice):
    from workflows import metrics, sla_figures

    start = breached().opened_at  # breached, decided late
    now = start + timedelta(hours=2)
    with time_machine.travel(start + timedelta(minutes=1), tick=False):
        in_time = [make_checkpoint() for _ in range(3)]
        make_checkpoint()  # still open, not due: not settled, not counted
    with time_machine.travel(start + timedelta(minutes=4), tick=False):
        for checkpoint in in_time:  # decided three minutes after opening, well within the target
            Decider(checkpoint).decide(by=alice, action="abort", instructions="in time")
    with time_machine.travel(start - timedelta(days=30), tick=False):  # the period before: one, in time
        Decider(make_checkpoint()).decide(by=alice, action="abort", instructions="in time")

    with time_machine.travel(now, tick=False):
        client.force_login(tess)
        page = client.get(reverse("breach_review")).content.decode()
        period = metrics.Filters.last(30, today=now.date())
    met = sla_figures.decision_target_met(period)
    assert (met.part, met.whole) == (3, 4)
    card = _card(page, "decision-met")
    assert "Decision target met" in card and "75.0 %" in card and "3 of 4" in card
    assert "-25.0 pts" in card and "(before: 100.0 %)" in card
    assert 'class="figure-trend down"' in page.split('data-testid="card-decision-met"')[1]
    decision = _card(page, "time-to-decision")  # the breached one is not decided yet: no time to count
    assert "3m · p90 3m" in decision and "median of 3" in decision


def test_escalations_reminders_and_releases_are_counted_from_the_sweeps_events(client, tess, adam):
    from workflows import metrics, sla_figures

    policy = make_policy(target=30, warning=10)
    EscalationLevel.objects.create(policy=policy, delay_minutes=5, notify=True, user=adam)
    EscalationLevel.objects.create(policy=policy, delay_minutes=10, notify=True, user=adam)
    make_runbook(workflow_kind="refund", policy=policy, slug="refunds")
    # At noon, so that the sweep 20 minutes past due (50 minutes on) stamps the same day as the page's period.
    with time_machine.travel(timezone.now().replace(hour=12, minute=0), tick=False):
        checkpoint = breached()  # the sweep 20 minutes past due fires both levels
        activity = sla_figures.sla_activity(metrics.Filters.last(30, today=checkpoint.due_at.date()))
        assert activity == {"escalations": 2, "reminders": 0, "releases": 0}
        client.force_login(tess)
        page = client.get(reverse("breach_review")).content.decode()
    card = _card(page, "escalations")
    assert '<div class="figure-value" data-testid="card-value">2</div>' in card and "(before: 0)" in card


def test_the_charts_show_breaches_by_runbook_reason_agent_kind_and_hour_of_week(client, tess):
    make_runbook(workflow_kind="ticket_triage", slug="triage")
    refunds = [breached(kind="refund") for _ in range(2)]
    triage = breached(kind="ticket_triage")
    staffing = BreachReason.objects.create(name="Understaffed <b>shift</b>")
    triage.explain_breach(reason=staffing, note="", by=tess)
    client.force_login(tess)
    page = client.get(reverse("breach_review")).content.decode()

    charts = page.split('data-testid="breach-charts"')[1].split("</section>")[0]
    assert charts.count("<svg") == 6 and "<script" not in charts
    by_kind = charts.split('data-testid="chart-by-kind"')[1].split("</figure>")[0]
    assert "refund: 2" in by_kind and "ticket_triage: 1" in by_kind
    by_reason = charts.split('data-testid="chart-by-reason"')[1].split("</figure>")[0]
    assert "Understaffed &lt;b&gt;shift&lt;/b&gt;: 1" in by_reason and "(not recorded): 2" in by_reason
    assert "reason=none" in by_reason  # a bar drills down to the table filtered by it
    hour = refunds[0].breached_at
    weekday = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[hour.weekday()]
    heat = charts.split('data-testid="chart-hour-of-week"')[1].split("</figure>")[0]
    assert f"{weekday} {hour.hour:02d}: 3" in heat  # all three breached in the same hour
    over_time = charts.split('data-testid="chart-over-time"')[1].split("</figure>")[0]
    assert f"breached, {refunds[0].opened_at:%d %b}: 3" in over_time


def test_the_figures_follow_the_filters(client, tess):
    breached(kind="refund")
    breached(kind="ticket_triage")
    client.force_login(tess)
    page = client.get(reverse("breach_review"), {"kind": "refund"}).content.decode()
    by_kind = page.split('data-testid="chart-by-kind"')[1].split("</figure>")[0]
    assert "refund: 1" in by_kind and "ticket_triage" not in by_kind
    assert "0 of 1" in _card(page, "decision-met")
