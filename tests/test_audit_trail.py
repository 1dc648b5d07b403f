"""The audit trail cannot be rewritten, keeps who acted, and says all of what was decided.

Finding 8 of issue 12 (and the admin half of finding 7): a queryset update() or
delete() changed events, deleting a user erased who decided, and admin changes
left no event.
"""

from __future__ import annotations

import csv
import importlib
import io
import secrets

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.db.models import ProtectedError
from django.urls import reverse

from tests.helpers import make_agent, make_checkpoint, make_user, make_worked_example
from workflows.models import Decider, Event, IllegalTransition


@pytest.mark.postgres
@pytest.mark.parametrize("statement", ["UPDATE workflows_event SET verb = 'claimed'", "DELETE FROM workflows_event"])
def test_postgresql_refuses_to_change_or_remove_an_event(db, statement):
    make_checkpoint()
    before = list(Event.objects.values_list("pk", "verb"))
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert list(Event.objects.values_list("pk", "verb")) == before and before


def _truncate_migration():
    return importlib.import_module("workflows.migrations.0024_audit_trail_refuses_truncate")


@pytest.mark.postgres
@pytest.mark.parametrize("statement", ["TRUNCATE workflows_event", "TRUNCATE workflows_workflow CASCADE"])
def test_a_role_that_does_not_own_the_audit_table_cannot_truncate_it_even_when_granted_all(db, statement):
    """Issue 22, finding 9: TRUNCATE fires no row trigger, and emptied the trail."""
    make_checkpoint()
    before = list(Event.objects.values_list("pk", "verb"))
    role = f"rc_audit_probe_{secrets.token_hex(4)}"  # rolled back with the test's transaction
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # as if committed: no deferred key check pending
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        cursor.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")  # TRUNCATE included
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            cursor.execute(f"SET LOCAL ROLE {role}")
            cursor.execute(statement)
        cursor.execute("RESET ROLE")
    assert list(Event.objects.values_list("pk", "verb")) == before and before


@pytest.mark.postgres
def test_the_migration_revokes_truncate_on_the_audit_table_from_every_role_but_its_owner(db):
    role = f"rc_audit_probe_{secrets.token_hex(4)}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {role} NOLOGIN")
        cursor.execute(f"GRANT TRUNCATE, SELECT ON workflows_event TO {role}")
        cursor.execute(_truncate_migration().REVOKE_TRUNCATE)
        cursor.execute(
            "SELECT has_table_privilege(%s, 'workflows_event', 'TRUNCATE'), "
            "has_table_privilege(%s, 'workflows_event', 'SELECT')",
            [role, role],
        )
        assert cursor.fetchone() == (False, True)


def test_the_orm_refuses_bulk_updates_and_deletes_of_events(db):
    make_checkpoint()
    with pytest.raises(IllegalTransition):
        Event.objects.all().update(verb="claimed")
    with pytest.raises(IllegalTransition):
        Event.objects.all().delete()


def test_someone_who_acted_is_deactivated_never_deleted(client, alice, adam):
    make_checkpoint().claim(by=alice)
    with pytest.raises(ProtectedError):
        alice.delete()
    client.force_login(adam)
    page = client.get(reverse("admin:auth_user_delete", args=[alice.pk]))
    assert page.status_code == 403
    idle = make_user("idle", role="operator")
    assert client.get(reverse("admin:auth_user_delete", args=[idle.pk])).status_code == 200


def test_events_keep_the_actors_name_as_text(alice):
    checkpoint = make_checkpoint()
    checkpoint.claim(by=alice)
    get_user_model().objects.filter(pk=alice.pk).update(username="alice-renamed", is_active=False)
    claimed = Event.objects.get(checkpoint=checkpoint, verb=Event.Verb.CLAIMED)
    assert claimed.actor_name == "alice" and claimed.actor == "alice"
    assert claimed.subject == f"checkpoint:{checkpoint.pk}"


def test_a_decisions_event_holds_its_instructions_confirmations_and_references(alice):
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    checkpoint.claim(by=alice)
    key = checkpoint.workflow.steps.get(seq=3).idempotency_key
    Decider(checkpoint).decide(
        by=alice,
        action="resume",
        instructions="Write the note, then notify.",
        confirmations={key: "happened"},
        confirmation_refs={key: "R-88"},
        money_confirmed=True,
    )
    decided = Event.objects.get(checkpoint=checkpoint, verb=Event.Verb.DECIDED)
    assert decided.data["instructions"] == "Write the note, then notify."
    assert decided.data["confirmations"] == {key: "happened"}
    assert decided.data["confirmation_refs"] == {key: "R-88"}


def test_what_a_polling_agent_does_is_attributed_to_the_agent(alice):
    checkpoint = make_checkpoint()  # no resume URL: the agent polls
    decision = Decider(checkpoint).decide(by=alice, action="resume")
    assert decision.mark_fetched()
    for verb in (Event.Verb.FETCHED_BY_AGENT, Event.Verb.RESOLVED, Event.Verb.RESUMED):
        event = Event.objects.get(workflow=checkpoint.workflow, verb=verb)
        assert (event.actor_type, event.actor_name) == ("agent", checkpoint.workflow.agent.name), verb


def test_admin_changes_are_events_with_before_and_after(client, adam, alice, bob):
    agent, _ = make_agent("billing-bot", owner=alice)
    workflow = make_worked_example(agent=agent, owner=alice)
    client.force_login(adam)

    client.post(
        reverse("admin:workflows_agent_change", args=[agent.pk]),
        {
            "name": "billing-bot",
            "description": "",
            "resume_url": "",
            "owner": bob.pk,
            "silence_seconds": "",
            "is_active": "",
        },
    )
    client.post(
        reverse("admin:workflows_workflow_change", args=[workflow.pk]),
        {"owner": bob.pk, "steps-TOTAL_FORMS": "0", "steps-INITIAL_FORMS": "0"},
    )
    client.post(reverse("admin:workflows_agent_changelist"), {"action": "rotate_token", "_selected_action": [agent.pk]})

    changed = Event.objects.get(subject=f"agent:{agent.pk}", verb=Event.Verb.ADMIN_CHANGED)
    assert changed.actor_name == "adam"
    assert changed.data["before"] == {"owner": "alice", "is_active": True}
    assert changed.data["after"] == {"owner": "bob", "is_active": False}
    owner = Event.objects.get(workflow=workflow, verb=Event.Verb.ADMIN_CHANGED)
    assert (owner.data["before"], owner.data["after"]) == ({"owner": "alice"}, {"owner": "bob"})
    rotated = Event.objects.get(subject=f"agent:{agent.pk}", verb=Event.Verb.TOKEN_ROTATED)
    assert rotated.data["before"]["token_prefix"] != rotated.data["after"]["token_prefix"]
    assert "token_hash" not in str(changed.data) and "signing_secret" not in str(changed.data)


def test_admins_filter_the_trail_and_export_it_as_csv(client, adam, alice):
    checkpoint = make_checkpoint(detail='=HYPERLINK("http://evil.example")')
    checkpoint.claim(by=alice)
    client.force_login(adam)
    listing = client.get(reverse("admin:workflows_event_changelist"), {"q": "alice"})
    assert [e.verb for e in listing.context["cl"].result_list] == ["claimed"]
    by_verb = client.get(reverse("admin:workflows_event_changelist"), {"verb__exact": "opened"})
    assert [e.verb for e in by_verb.context["cl"].result_list] == ["opened"]

    export = client.post(
        reverse("admin:workflows_event_changelist"),
        {"action": "export_csv", "_selected_action": list(Event.objects.values_list("pk", flat=True))},
    )

    assert export["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert {r["verb"] for r in rows} >= {"opened", "claimed"}
    assert [r["actor_name"] for r in rows if r["verb"] == "claimed"] == ["alice"]
    assert all(not r["data"].startswith("=") for r in rows)


def test_new_credentials_are_shown_in_the_page_body_only(client, adam):
    agent, _ = make_agent("cookie-bot")
    client.force_login(adam)
    response = client.post(
        reverse("admin:workflows_agent_changelist"), {"action": "rotate_token", "_selected_action": [agent.pk]}
    )
    agent.refresh_from_db()
    body = response.content.decode()
    assert agent.token_prefix in body and "no-store" in response["Cache-Control"]
    assert not any(agent.token_prefix in morsel.value for morsel in client.cookies.values())
    assert not any(agent.token_prefix in morsel.value for morsel in response.cookies.values())
