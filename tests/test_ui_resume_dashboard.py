"""The resume dashboard, its drill-downs and CSV exports, readiness and the staffing budget, as a TPM reads them."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from tests.helpers import squeezed
from tests.recovery_histories import build_history
from workflows import metrics

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(alice, bob, adam):
    return build_history(operator=alice, other=bob, owner=adam)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def rows(response) -> list[list[str]]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.parametrize("page", ["/resumes/", "/readiness/", "/staffing/", "/resumes/workflows/?figure=degraded"])
def test_operators_are_told_the_figures_are_for_tpms_and_admins(alice, page):
    response = client_for(alice).get(page)
    assert response.status_code == 403
    assert b"for TPMs and admins" in response.content


def test_the_navigation_links_the_tpm_pages_for_tpms_only(alice, tess):
    assert b'href="/resumes/"' in client_for(tess).get("/").content
    assert b'href="/staffing/"' in client_for(tess).get("/").content
    assert b'href="/resumes/"' not in client_for(alice).get("/").content


def test_the_dashboard_shows_the_four_shares_with_their_counts_and_drill_downs(history, tess):
    page = client_for(tess).get("/resumes/").content.decode()
    summary = metrics.summary(metrics.Filters.last())
    for slug in metrics.HEADLINES:
        share = summary[slug]
        assert f'data-testid="figure-{slug}"' in page
        assert f"{share.part}</a> of {share.whole}" in page
        assert f"figure={slug}%3Amet" in page
    assert "1 of 7" in page and "4</a> of 5" in page  # resumed without data loss; same owner
    assert "no previous figure" in page  # nothing degraded in the previous 28 days
    assert page.count('<svg class="chart') >= 6  # motion, shares, and a bar chart per breakdown


def test_a_drill_down_lists_the_workflows_behind_a_figure_and_links_their_checkpoints(history, tess):
    response = client_for(tess).get("/resumes/workflows/?figure=same_owner%3Amissed")
    page = response.content.decode()
    assert "Returned to the same owner: missed" in page
    assert page.count('data-testid="drill-row"') == 1 and "Refund for ticket handoff" in page
    assert "/checkpoints/" in page
    assert client_for(tess).get("/resumes/workflows/?figure=nonsense").status_code == 404


def test_filters_travel_in_the_url(history, tess):
    page = client_for(tess).get("/resumes/?reason=provider_change&grain=week").content.decode()
    assert '<option value="provider_change" selected>' in squeezed(page)
    assert '<option value="week" selected>' in page
    drill = client_for(tess).get("/resumes/workflows/?reason=provider_change&figure=degraded").content.decode()
    assert drill.count('data-testid="drill-row"') == 1


def test_every_table_exports_as_csv_honouring_the_filters(history, tess):
    client = client_for(tess)
    headline = {r[0]: r for r in rows(client.get("/resumes/export/headline.csv"))}
    assert headline["resumed_without_data_loss"][1:4] == ["14.3", "1", "7"]
    assert headline["launches"][2] == "9" and headline["duplicate_attempt"][2] == "1"
    kinds = rows(client.get("/resumes/export/kind.csv"))
    assert kinds[0][:2] == ["kind", "degraded"] and kinds[1][:2] == ["refund", "8"]
    only = rows(client.get("/resumes/export/workflows.csv?figure=lost_effect"))
    assert sorted(r[1] for r in only[1:]) == ["lost-promise", "lost-refund"]
    for table in ("series", "timings", "decisions", "agent", "reason", "runbook"):
        assert len(rows(client.get(f"/resumes/export/{table}.csv"))) >= 2, table
    assert client.get("/resumes/export/secrets.csv").status_code == 404


def test_agent_text_is_escaped_on_the_dashboard_and_defused_in_csv(tess):
    from tests.apitools import api_agent

    api = api_agent("evil-bot")
    wf = api.create_workflow("X-1", kind='=HYPERLINK("http://x")<script>alert(1)</script>')["id"]
    api.finish(wf, "failed")
    page = client_for(tess).get("/resumes/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    exported = rows(client_for(tess).get("/resumes/export/kind.csv"))
    assert exported[1][0].startswith("'=HYPERLINK")


def test_readiness_names_each_gap_and_gives_a_verdict(history, tess):
    page = client_for(tess).get("/readiness/").content.decode()
    assert 'data-testid="readiness-refund"' in page
    assert "not ready" in page
    assert "`refund`: 1 workflow(s) failed without a checkpoint (a blank state)" in page
    assert "`refund`: no runbook for reason `provider_change`" in page


def test_the_staffing_budget_draws_the_week_and_lists_the_policies(history, tess):
    page = squeezed(client_for(tess).get("/staffing/?level=0.9").content.decode())
    assert 'data-testid="staffing-heatmap"' in page and "Operators needed per hour of the week" in page
    assert "default (no policy)" in page and "15m" in page and "30m" in page
    assert '<option value="0.9" selected>' in page
