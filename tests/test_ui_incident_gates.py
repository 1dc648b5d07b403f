"""The rollout's gates as operators use them on the incident page: paste or upload the provider's references,
read matched / unmatched (look-alikes named), confirm; bad input comes back with a clear error and the text
kept; the money total typed per currency; a four-eyes rollout approved by another operator, never its
proposer; members waiting shown with why. Each step on the incident's timeline."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from tests.helpers import make_agent, make_checkpoint, make_runbook, make_worked_example, squeezed
from workflows.models import Decision, EffectConfirmation, Event, Evidence, Incident, Rollout
from workflows.models.evidence import unconfirmed_effects

pytestmark = pytest.mark.django_db

SHIPPING = [{"name": "refund_shipping", "kind": "effect", "amount": "5.00", "currency": "EUR", "moves_money": True}]


def _incident(n=3, *, unknown=3, plan=None):
    agent, _ = make_agent()
    agent.incident_threshold = n
    agent.save()
    for i in range(n):
        kwargs = {"plan": plan} if plan is not None else {}
        make_checkpoint(
            make_worked_example(agent=agent, refund_status="pending" if i < unknown else "committed"),
            reason="tool_error",
            detail=f"provider answered 502 for T-{i}",
            **kwargs,
        )
    return Incident.objects.get()


def _page(client, incident):
    return squeezed(client.get(reverse("incident", args=[incident.pk])).content.decode())


def test_paste_preview_then_confirm_from_the_incident_page(client, alice):
    incident = _incident(3)
    k1, k2, k3 = sorted(e.key for e in unconfirmed_effects(incident))
    client.force_login(alice)
    page = _page(client, incident)
    assert 'data-testid="incident-evidence"' in page and "3 unknown effects" in page

    lookalike = k2.replace("-", "\u2010", 1)  # a Unicode hyphen where the key has "-"
    answer = client.post(
        reverse("submit_evidence", args=[incident.pk]), {"text": f"{k1}, re_001\n{lookalike}, re_002\nre_nothing\n"}
    )
    evidence = Evidence.objects.get()
    assert answer.status_code == 302 and answer["Location"] == reverse("evidence_preview", args=[evidence.pk])
    preview = squeezed(client.get(answer["Location"]).content.decode())
    assert not EffectConfirmation.objects.exists(), "the preview confirms nothing"
    assert 'data-testid="matched-count">1<' in preview
    assert 'data-testid="unmatched-references-count">2<' in preview
    assert 'data-testid="unmatched-effects-count">2<' in preview
    assert preview.count('data-testid="lookalike"') == 1 and "U+2010" in preview

    digest = evidence.matching().digest
    client.post(reverse("apply_evidence", args=[evidence.pk]), {"digest": digest})
    assert list(EffectConfirmation.objects.values_list("idempotency_key", "verdict", "reference")) == [
        (k1, "happened", "re_001")
    ]
    page = _page(client, incident)
    assert "confirmed 1 unknown effects as happened from the provider&#x27;s evidence" in page
    assert "2 unknown effects" in page


def test_an_uploaded_csv_and_the_did_not_happen_tick(client, alice):
    incident = _incident(2)
    k1, k2 = sorted(e.key for e in unconfirmed_effects(incident))
    client.force_login(alice)
    upload = SimpleUploadedFile(
        "refunds.csv", f"idempotency_key,reference\r\n{k1},re_001\r\n".encode("utf-8-sig"), content_type="text/csv"
    )
    answer = client.post(reverse("submit_evidence", args=[incident.pk]), {"text": "", "file": upload})
    evidence = Evidence.objects.get()
    assert answer.status_code == 302 and evidence.filename == "refunds.csv"
    preview = client.get(answer["Location"]).content.decode()
    assert 'data-testid="did-not-happen"' in preview
    client.post(
        reverse("apply_evidence", args=[evidence.pk]), {"digest": evidence.matching().digest, "did_not_happen": "1"}
    )
    assert dict(EffectConfirmation.objects.values_list("idempotency_key", "verdict")) == {
        k1: "happened",
        k2: "did_not_happen",
    }


@pytest.mark.parametrize(
    ("post", "says"),
    [
        ({"text": "   \n  "}, "The list is empty"),
        ({"text": "", "file": ("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00")}, "binary file"),
        ({"text": "", "file": ("big.csv", b"A:1,re\n" * 150_000)}, "at most 1,000,000"),
        ({"text": "A:1\x00,re_1"}, "control character"),
    ],
)
def test_bad_input_comes_back_with_a_clear_error_and_the_text_kept(client, alice, post, says):
    incident = _incident(2)
    client.force_login(alice)
    if "file" in post:
        name, data = post["file"]
        post = {**post, "file": SimpleUploadedFile(name, data)}
    answer = client.post(reverse("submit_evidence", args=[incident.pk]), post)
    assert answer.status_code == 400
    html = answer.content.decode()
    assert 'data-testid="evidence-error"' in html and says in html
    if post["text"].strip():
        assert "A:1" in html, "the pasted text is back in the form"
    assert not Evidence.objects.exists() and not EffectConfirmation.objects.exists()


def test_a_tpm_reads_the_preview_but_confirms_nothing(client, alice, tess):
    incident = _incident(1)
    evidence = Evidence.submit(incident, text="x", by=alice)
    client.force_login(tess)
    assert client.get(reverse("evidence_preview", args=[evidence.pk])).status_code == 200
    assert client.post(reverse("submit_evidence", args=[incident.pk]), {"text": "x"}).status_code == 403
    assert client.post(reverse("apply_evidence", args=[evidence.pk]), {"digest": "x"}).status_code == 403


def test_a_stale_preview_says_so_and_confirms_nothing(client, alice):
    incident = _incident(1)
    [key] = [e.key for e in unconfirmed_effects(incident)]
    evidence = Evidence.submit(incident, text=f"{key},re_1", by=alice)
    client.force_login(alice)
    answer = client.post(reverse("apply_evidence", args=[evidence.pk]), {"digest": "not-what-was-shown"}, follow=True)
    assert "changed since the preview" in answer.content.decode()
    assert not EffectConfirmation.objects.exists()


def test_the_money_total_is_typed_on_the_rollout_form(client, alice):
    incident = _incident(3, unknown=0, plan=SHIPPING)
    client.force_login(alice)
    page = _page(client, incident)
    assert 'data-testid="rollout-stake">15.00 EUR<' in page and 'name="money_total_EUR"' in page
    form = {"action": "resume", "canary_percent": 100, "per_minute": 30}
    refused = client.post(reverse("start_rollout", args=[incident.pk]), {**form, "money_total_EUR": "150"}, follow=True)
    assert "The total at stake in EUR is 15.00, not 150" in refused.content.decode()
    assert not Rollout.objects.exists()
    client.post(reverse("start_rollout", args=[incident.pk]), {**form, "money_total_EUR": "15.00"})
    rollout = Rollout.objects.get()
    assert rollout.money_total == {"EUR": "15.00"}
    assert "Money confirmed by alice: 15.00 EUR" in _page(client, incident)


def test_four_eyes_on_the_page_proposed_by_one_approved_by_another(client, alice, bob):
    make_runbook(workflow_kind="refund", four_eyes_on_every_resume=True)
    incident = _incident(2, unknown=1, plan=[])
    client.force_login(alice)
    client.post(
        reverse("start_rollout", args=[incident.pk]),
        {"action": "resume", "canary_percent": 100, "per_minute": 30, "money_total_EUR": "42.00"},
    )
    rollout = Rollout.objects.get()
    assert rollout.status == Rollout.Status.PROPOSED
    page = _page(client, incident)
    assert 'data-testid="rollout-awaits-approval"' in page and 'data-testid="rollout-approve"' not in page
    assert 'data-testid="rollout-own-proposal"' in page
    refused = client.post(reverse("steer_rollout", args=[rollout.pk]), {"do": "approve"}, follow=True)
    assert "must come from another operator" in refused.content.decode()

    client.force_login(bob)
    assert 'data-testid="rollout-approve"' in _page(client, incident)
    client.post(reverse("steer_rollout", args=[rollout.pk]), {"do": "approve"})
    rollout.refresh_from_db()
    assert (rollout.status, rollout.approved_by) == (Rollout.Status.RUNNING, bob)
    Rollout.advance_due(timezone.now())
    page = _page(client, incident)
    assert "approved the rollout proposed by alice" in page and "Approved by bob" in page
    assert 'data-testid="waiting-member"' in page and "Confirm what happened to every unknown effect" in page
    assert Decision.objects.get().approved_by == bob
    assert Event.objects.filter(
        subject=f"incident:{incident.pk}", verb=Event.Verb.ROLLOUT_PROPOSED, actor_user=alice
    ).exists()
