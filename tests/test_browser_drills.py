"""In Chromium: a TPM defines and starts an unannounced drill, the drilled runs go through the queue
(an operator does not see the badge, the TPM does), and the TPM reads a "passed" report."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.apitools import api_agent
from tests.browser_fixtures import login
from tests.recovery_histories import Fleet
from workflows.models import Checkpoint, Drill

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/shots")


def test_a_tpm_defines_starts_and_reads_a_drill(new_page, tess, alice):
    fleet = Fleet(api_agent("support-bot"), alice)
    fleet.api.agent.advertise(["drill", "drill_sandbox"])
    tpm = new_page()
    login(tpm, tess)
    tpm.get_by_test_id("nav-drills").click()
    tpm.fill("#id_name", "Tuesday: crash after the refund")
    tpm.select_option("#id_agent", label="support-bot")
    tpm.select_option("#id_fault", "crash_after_step")
    tpm.fill("#id_at_seq", "3")
    tpm.fill("#id_runs", "2")
    tpm.uncheck("#id_announced")
    tpm.get_by_test_id("define-drill").click()
    expect(tpm.get_by_test_id("drill-row")).to_have_count(1)
    tpm.get_by_test_id("start-drill").click()
    expect(tpm.get_by_test_id("drill-status")).to_have_text("running")
    SHOTS.mkdir(exist_ok=True)
    tpm.screenshot(path=str(SHOTS / "drills.png"), full_page=True)

    runs = [fleet.start(ext) for ext in ("T-1", "T-2")]
    checkpoints = [fleet.pause(wf) for wf in runs]
    operator = new_page()
    login(operator, alice)
    expect(operator.get_by_test_id("workflow-link")).to_have_count(2)
    expect(operator.get_by_test_id("drill-badge")).to_have_count(0)  # unannounced: not told
    tpm.goto(tpm.url.split("/drills/")[0] + "/")
    expect(tpm.get_by_test_id("drill-badge")).to_have_count(2)

    for wf, checkpoint in zip(runs, checkpoints, strict=True):
        fleet.decide(Checkpoint.objects.get(pk=checkpoint.pk))
        fleet.complete(wf)
    drill = Drill.objects.get()
    tpm.goto(tpm.url.rstrip("/") + f"/drills/{drill.pk}/report/")
    expect(tpm.get_by_test_id("verdict")).to_have_text("passed")
    expect(tpm.get_by_test_id("drill-run")).to_have_count(2)
    tpm.screenshot(path=str(SHOTS / "drill-report.png"), full_page=True)
