"""Roles: operators and admins act, a TPM reads and gets a clear 403 on every action."""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.roles import can_act, operators
from tests.helpers import make_checkpoint, make_user
from workflows.models import Checkpoint, Workflow


def test_make_user_puts_each_persona_in_its_group(alice, tess, adam):
    assert [g.name for g in alice.groups.all()] == ["operator"]
    assert [g.name for g in tess.groups.all()] == ["tpm"]
    assert [g.name for g in adam.groups.all()] == ["admin"]
    assert can_act(alice) and can_act(adam) and not can_act(tess)
    assert list(operators()) == [adam, alice]


def test_changing_role_leaves_one_group(db):
    user = make_user("rita", role="operator")
    make_user("rita", role="tpm")
    assert [g.name for g in user.groups.all()] == ["tpm"]


@pytest.mark.parametrize("action", ["claim", "release", "assign", "decide"])
def test_a_tpm_gets_a_403_page_on_every_checkpoint_action(client, tess, alice, action):
    checkpoint = make_checkpoint()
    client.force_login(tess)

    response = client.post(
        reverse(action, args=[checkpoint.pk]), {"to": "alice", "action": "abort", "instructions": "no"}
    )

    assert response.status_code == 403
    assert "only operators and admins" in response.content.decode()
    checkpoint.refresh_from_db()
    assert checkpoint.status == Checkpoint.Status.OPEN and not checkpoint.decisions.exists()


@pytest.mark.parametrize("action", ["approve", "reject"])
def test_a_tpm_cannot_answer_a_four_eyes_decision(client, tess, action):
    client.force_login(tess)
    assert client.post(reverse(action, args=[1])).status_code == 403


def test_actions_refuse_get(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)
    assert client.get(reverse("claim", args=[checkpoint.pk])).status_code == 405


def test_an_admin_can_act(client, adam):
    checkpoint = make_checkpoint()
    client.force_login(adam)
    client.post(reverse("claim", args=[checkpoint.pk]))
    checkpoint.refresh_from_db()
    assert checkpoint.assignee == adam


def test_a_tpm_who_owns_handed_off_work_cannot_complete_it(client, tess):
    # Finding 1 of issue 12: the owner check alone let a read-only TPM complete a workflow.
    workflow = make_checkpoint().workflow
    Workflow.objects.filter(pk=workflow.pk).update(owner=tess, status=Workflow.Status.HANDED_OFF)
    client.force_login(tess)

    response = client.post(reverse("complete_handoff", args=[workflow.pk]), {"summary": "done"})

    assert response.status_code == 403
    workflow.refresh_from_db()
    assert workflow.status == Workflow.Status.HANDED_OFF


def test_a_user_without_a_role_sees_no_page(client, db):
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user("nobody", password="pw-" + "x" * 12)
    client.force_login(nobody)
    assert client.get(reverse("queue")).status_code == 403
