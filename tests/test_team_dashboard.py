"""The resume dashboard per team: filtered by a team and broken down by team, from the daily rollups
exactly as the live definitions count it, with the team kept in every link and CSV; and the staffing
page's two forms keep the team chosen in either.

A workflow counts for each team that held one of its checkpoints (the team is frozen when a checkpoint
opens and moves only by a transfer); launches belong to no team. Histories are built through the agent
API and the operators' transitions (tests/recovery_histories.py).
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from tests.apitools import api_agent
from tests.recovery_histories import Fleet
from tests.test_daily_rollups import assert_same_figures
from tests.test_team_routing import make_team
from workflows import metrics, rollups, tasks
from workflows.models import Checkpoint, RoutingRule
from workflows.models.teams import transfer
from workflows.rollups import rolling


@pytest.fixture
def teams_history(db, alice, bob, adam, monkeypatch):
    # A test's whole history is younger than the roll's two-minute look-back: without this it stays live.
    monkeypatch.setattr(rolling, "IN_FLIGHT", timedelta(0))
    billing, trust = make_team("Billing", alice), make_team("Trust", bob)
    RoutingRule.objects.create(team=billing, workflow_kind="refund")
    RoutingRule.objects.create(team=trust, workflow_kind="abuse")
    fleet = Fleet(api_agent("team-bot"), alice)
    resumed = fleet.start("billing-resumed")  # billing: resumed and completed
    fleet.decide(fleet.pause(resumed))
    fleet.complete(resumed)
    fleet.pause(fleet.start("billing-waiting"))  # billing: still in flight
    abuse = fleet.start("trust-resumed", kind="abuse")  # trust: resumed and completed
    fleet.decide(fleet.pause(abuse))
    fleet.complete(abuse)
    both = fleet.start("both-teams")  # billing's first checkpoint, then one transferred to trust
    fleet.decide(fleet.pause(both))
    second = Checkpoint.objects.get(pk=fleet.api.open_checkpoint(both, reason="provider_change", at_seq=5)["id"])
    assert second.team == billing and transfer(second, to=trust, by=adam)
    fleet.pause(fleet.start("nobodys", kind="survey"))  # no rule takes surveys: no team
    fleet.start("never-paused")  # a launch only
    return billing, trust


def as_tpm(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def csv_rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


class Forms(HTMLParser):
    """The page's forms as a browser would submit them: {data-testid or index: [(name, value), …]}."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, list[tuple[str, str]]] = {}
        self.current: list[tuple[str, str]] | None = None
        self.select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.current = self.forms.setdefault(a.get("data-testid") or str(len(self.forms)), [])
        elif self.current is not None and tag == "input" and a.get("name") and a.get("type") != "submit":
            if a.get("type") not in ("checkbox", "radio") or "checked" in a:
                self.current.append((a["name"], a.get("value", "")))
        elif self.current is not None and tag == "select":
            self.select = a.get("name")
        elif self.current is not None and tag == "option" and self.select and "selected" in a:
            self.current.append((self.select, a.get("value", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.current = None
        elif tag == "select":
            self.select = None


def forms_of(response) -> dict[str, list[tuple[str, str]]]:
    parser = Forms()
    parser.feed(response.content.decode())
    return parser.forms


def test_rolled_figures_per_team_equal_the_live_definitions(teams_history):
    for rolled in (False, True):  # computed live (nothing rolled yet), then read from the stored rows
        if rolled:
            tasks.roll_figures()
            today = metrics.Filters.last()
            assert rollups.live_days(today.start, today.end) == set()
        for team in ("", "billing", "trust", "nobody"):
            assert_same_figures(metrics.Filters.last(team=team))
        assert_same_figures(metrics.Filters.last(team="billing", reason="provider_change"))
        by_team = {row.value: row.degraded for row in rollups.Figures(metrics.Filters.last()).breakdown("team")}
        assert by_team == {"billing": 3, "trust": 2}  # the transferred workflow counts for both
    everything, billing = (rollups.Figures(metrics.Filters.last(team=t)).summary() for t in ("", "billing"))
    assert everything.counts["degraded"] == 5 and billing.counts["degraded"] == 3
    assert billing.launches == everything.launches == 6  # launches belong to no team
    assert billing.resumes == 2 and billing["resumed_without_data_loss"].part == 1


def test_the_dashboard_filters_by_team_and_keeps_the_team_in_its_links(teams_history, tess):
    client = as_tpm(tess)
    page = client.get(reverse("resumes") + "?team=trust")
    assert page.context["now"].counts["degraded"] == 2 and page.context["filters"].team == "trust"
    assert ("team", "trust") in forms_of(page)["metric-filters"]  # the filter shows what is applied
    html = page.content.decode()
    for link in ("figure=degraded", "/resumes/export/headline.csv", "/resumes/export/team.csv"):
        assert any("team=trust" in href for href in hrefs(html, link)), link
    drill = client.get(reverse("resume_workflows") + "?team=trust&figure=degraded")
    assert {w.external_id for w, _ in drill.context["rows"]} == {"trust-resumed", "both-teams"}
    assert "team=trust" in drill.context["back"]
    headline = {r[0]: r for r in csv_rows(client.get(reverse("resume_export", args=["headline"]) + "?team=trust"))}
    assert headline["degraded"][2] == "2" and headline["launches"][2] == "6"


def test_the_dashboard_breaks_the_figures_down_by_team(teams_history, tess):
    client = as_tpm(tess)
    page = client.get(reverse("resumes"))
    (table,) = [b for b in page.context["breakdowns"] if b["dimension"] == "team"]
    assert [(r.value, r.degraded) for r in table["rows"]] == [("billing", 3), ("trust", 2)]
    assert b'data-testid="breakdown-team"' in page.content
    billing_link = [h for h in hrefs(page.content.decode(), "/resumes/?") if "team=billing" in h]
    assert billing_link, "each team's row filters the dashboard to it"
    rows = csv_rows(client.get(reverse("resume_export", args=["team"])))
    assert rows[0][:2] == ["team", "degraded"] and [r[:2] for r in rows[1:]] == [["billing", "3"], ["trust", "2"]]


def hrefs(html: str, containing: str) -> list[str]:
    from html import unescape

    return [unescape(part.split('"', 1)[0]) for part in html.split('href="')[1:] if containing in part.split('"')[0]]


def submit(client: Client, url: str, fields: list[tuple[str, str]], **changed: str):
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    data.update({name: [value] for name, value in changed.items()})
    return client.get(url, data)


def test_the_staffing_page_keeps_the_team_whichever_form_is_submitted(teams_history, tess):
    client = as_tpm(tess)
    url = reverse("staffing")
    page = client.get(url, {"team": "trust"})
    assert page.context["team"].slug == "trust"
    # Change the service level in the team's form: the team is still chosen.
    level_form = next(f for f in forms_of(page).values() if any(name == "level" for name, _ in f))
    assert ("team", "trust") in level_form
    page = submit(client, url, level_form, level="0.9")
    assert page.context["team"].slug == "trust" and page.context["level"] == pytest.approx(0.9)
    # Change the period in the period bar: the team and the level are still chosen.
    start = (metrics.Filters.last().end - timedelta(days=6)).isoformat()
    page = submit(client, url, forms_of(page)["metric-filters"], start=start)
    assert page.context["team"].slug == "trust" and page.context["level"] == pytest.approx(0.9)
    assert page.context["filters"].start.isoformat() == start
    assert ("team", "trust") in next(f for f in forms_of(page).values() if any(n == "level" for n, _ in f))
