"""Runbooks are versioned: each save that changes one writes a new immutable version, a checkpoint keeps
the version it opened with, the workbench says when a newer one exists, and a diff shows what changed."""

import pytest
from django.db.models import ProtectedError
from django.urls import reverse

from tests.helpers import make_checkpoint, make_runbook, make_worked_example, squeezed
from workflows.models import Action, Checkpoint, Decider, Decision, Runbook, RunbookVersion


def edit(client, runbook, **changes):
    """Post the console's editor with the runbook's current values and ``changes``."""
    runbook.refresh_from_db()
    data = {
        "title": runbook.title,
        "url": runbook.url,
        "body": runbook.body,
        "workflow_kind": runbook.workflow_kind,
        "reason": runbook.reason,
        "priority": runbook.priority,
        "allowed_actions": runbook.allowed_actions,
        "policy": runbook.policy_id or "",
        "agent": runbook.agent_id or "",
        "owner": runbook.owner_id or "",
        "review_by": runbook.review_by or "",
        "is_default": runbook.is_default,
        "requires_four_eyes": runbook.requires_four_eyes,
        "four_eyes_on_every_resume": runbook.four_eyes_on_every_resume,
        "based_on": runbook.current_version.number,
    }
    data.update(changes)
    data = {k: v for k, v in data.items() if v is not False}
    return client.post(reverse("runbook_edit", args=[runbook.pk]), data)


def test_a_new_runbook_is_version_1_and_a_save_that_changes_nothing_writes_no_version(db):
    runbook = make_runbook(title="Refunds")
    assert runbook.current_version.number == 1 and runbook.versions.count() == 1
    runbook.save()
    assert runbook.versions.count() == 1
    runbook.body = "Check the ledger, then the ticket."
    runbook.save()
    assert list(runbook.versions.values_list("number", "body")) == [
        (2, "Check the ledger, then the ticket."),
        (1, "Check the payment ledger."),
    ]
    assert Runbook.objects.get(pk=runbook.pk).current_version.number == 2


def test_an_edit_in_the_console_is_a_new_version_and_an_open_checkpoint_keeps_the_one_it_opened_with(
    client, adam, alice
):
    runbook = make_runbook(workflow_kind="refund", body="Old advice: **resume** at once.")
    before = make_checkpoint()
    client.force_login(adam)
    answer = edit(
        client, runbook, body="New advice: check the ledger first.", allowed_actions=[Action.HANDOFF, Action.ABORT]
    )
    assert answer.status_code == 302 and answer["Location"] == reverse("runbook", args=[runbook.pk])
    runbook.refresh_from_db()
    assert runbook.current_version.number == 2
    assert runbook.current_version.created_by == adam
    after = make_checkpoint(make_worked_example())

    before.refresh_from_db()
    assert before.runbook_version.number == 1 and after.runbook_version.number == 2
    assert before.runbook_version.allows(Action.RESUME) and not after.runbook_version.allows(Action.RESUME)

    client.force_login(alice)
    old_page = squeezed(client.get(reverse("workbench", args=[before.pk])).content.decode())
    assert "Old advice: <strong>resume</strong> at once." in old_page and "New advice" not in old_page
    assert 'data-testid="runbook-newer"' in old_page and "Version 2 is newer" in old_page
    assert f"{reverse('runbook_diff', args=[runbook.pk])}?from=1&amp;to=2" in old_page
    assert 'data-testid="decide-resume"' in old_page  # version 1 allowed resuming: it still does
    new_page = client.get(reverse("workbench", args=[after.pk])).content.decode()
    assert "New advice" in new_page and 'data-testid="runbook-newer"' not in new_page
    assert 'data-testid="decide-resume"' not in new_page


def test_four_eyes_follow_the_version_the_checkpoint_opened_with(db, alice):
    runbook = make_runbook(workflow_kind="refund", requires_four_eyes=False)
    checkpoint = make_checkpoint()
    runbook.four_eyes_on_every_resume = True
    runbook.save()
    checkpoint.refresh_from_db()
    assert not Decider(checkpoint).needs_second_operator(Action.RESUME, money=False)
    assert Decider(make_checkpoint(make_worked_example())).needs_second_operator(Action.RESUME, money=False)


def test_saving_unchanged_in_the_console_says_so_and_writes_no_version(client, adam):
    runbook = make_runbook()
    client.force_login(adam)
    answer = edit(client, runbook)
    assert answer.status_code == 302
    assert runbook.versions.count() == 1
    page = client.get(answer["Location"]).content.decode()
    assert "Nothing changed" in page


def test_an_edit_based_on_a_replaced_version_is_refused_and_loses_nothing_stored(client, adam):
    runbook = make_runbook(body="first")
    client.force_login(adam)
    assert edit(client, runbook, body="second").status_code == 302  # someone else's save: version 2
    answer = edit(client, runbook, body="mine", based_on=1)
    assert answer.status_code == 409
    page = answer.content.decode()
    assert "Someone saved version 2 while you were editing version 1" in page
    assert "mine" in page  # the text typed is still in the form
    runbook.refresh_from_db()
    assert runbook.body == "second" and runbook.versions.count() == 2


def test_the_history_lists_every_version_with_who_saved_it_and_what_changed(client, adam, alice):
    runbook = make_runbook(title="Refunds")
    client.force_login(adam)
    edit(client, runbook, title="Refunds, reviewed", priority=5)
    client.force_login(alice)  # operators read the history: the workbench links to it
    page = client.get(reverse("runbook", args=[runbook.pk])).content.decode()
    assert 'data-number="2"' in page and 'data-number="1"' in page
    assert "title, priority" in page and "adam" in page
    assert 'data-testid="edit-runbook"' not in page  # editing is for admins


def test_the_diff_shows_removed_and_added_lines_and_escapes_what_admins_wrote(client, adam, alice):
    runbook = make_runbook(title="Refunds <b>bold</b>", body="line one\n<script>alert('old')</script>\nline three")
    client.force_login(adam)
    edit(
        client,
        runbook,
        title="Refunds <img src=x onerror=alert(1)>",
        body="line one\n<script>alert('new')</script>\nline three",
    )
    client.force_login(alice)
    answer = client.get(reverse("runbook_diff", args=[runbook.pk]), {"from": 1, "to": 2})
    page = answer.content.decode()
    assert answer.status_code == 200
    assert "<script>alert(" not in page and "<img src=x" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#x27;old&#x27;)&lt;/script&gt;" in page
    assert "&lt;script&gt;alert(&#x27;new&#x27;)&lt;/script&gt;" in page
    assert 'class="diff-old"' in page and 'class="diff-new"' in page
    assert "Title: Refunds &lt;img src=x onerror=alert(1)&gt;" in page
    assert "line one" in page  # context around the change


def test_a_diff_of_versions_that_do_not_exist_is_a_404(client, alice):
    runbook = make_runbook()
    client.force_login(alice)
    assert client.get(reverse("runbook_diff", args=[runbook.pk]), {"from": 1, "to": 7}).status_code == 404
    assert client.get(reverse("runbook_version", args=[runbook.pk, 9])).status_code == 404
    page = client.get(reverse("runbook_diff", args=[runbook.pk]), {"from": "x", "to": "1"})
    assert page.status_code == 200 and "The two versions are the same" in page.content.decode()


def test_a_version_page_renders_its_markdown_body_without_raw_html_and_names_the_current_one(client, alice):
    runbook = make_runbook(body="**Check** it\n\n<script>alert(1)</script>")
    runbook.body = "Now different"
    runbook.save()
    client.force_login(alice)
    page = squeezed(client.get(reverse("runbook_version", args=[runbook.pk, 1])).content.decode())
    assert "<strong>Check</strong>" in page and "<script>alert(1)</script>" not in page
    assert 'data-testid="not-current"' in page and "version 2 is" in page


def test_an_agent_deleted_later_leaves_its_runbooks_history_readable(db):
    from tests.helpers import make_agent

    agent, _ = make_agent("refund-bot")
    runbook = make_runbook(agent=agent)
    runbook.agent = None
    runbook.save()
    agent.workflows.all().delete()
    agent.delete()
    first = RunbookVersion.objects.get(runbook=runbook, number=1)
    assert first.agent is None and "Agent: (any)" in first.lines()


def test_the_migration_gives_each_runbook_version_1_and_its_checkpoints_that_version(transactional_db):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    # Found by name, not number: migrations are renumbered when branches land together.
    name = next(
        n for app, n in executor.loader.disk_migrations if app == "workflows" and n.endswith("_versioned_runbooks")
    )
    after = [("workflows", name)]
    before = [d for d in executor.loader.get_migration("workflows", name).dependencies if d[0] == "workflows"]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    agent = old.get_model("workflows", "Agent").objects.create(name="bot", token_hash="h" * 64, token_prefix="p")
    workflow = old.get_model("workflows", "Workflow").objects.create(
        agent=agent, external_id="T-1", kind="refund", title="T-1"
    )
    runbook = old.get_model("workflows", "Runbook").objects.create(
        slug="refunds", title="Refunds", body="Read.", allowed_actions=["resume"]
    )
    old.get_model("workflows", "Checkpoint").objects.create(
        workflow=workflow,
        reason="model_timeout",
        runbook=runbook,
        warn_at="2026-01-01T00:00Z",
        due_at="2026-01-01T00:10Z",
    )
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps
    version = new.get_model("workflows", "RunbookVersion").objects.get()
    assert (version.number, version.title, version.body, version.allowed_actions) == (1, "Refunds", "Read.", ["resume"])
    assert new.get_model("workflows", "Runbook").objects.get().current_version_id == version.pk
    assert new.get_model("workflows", "Checkpoint").objects.get().runbook_version_id == version.pk
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_deleting_a_runbook_in_the_admin_keeps_its_versions_and_four_eyes_on_open_checkpoints(client, alice, adam):
    """Issue 22, finding 6 (this test used to assert the hole: the checkpoint lost its runbook version and,
    with it, the four eyes and allowed decisions it opened under)."""
    runbook = make_runbook(workflow_kind="refund", requires_four_eyes=True, allowed_actions=["resume", "abort"])
    checkpoint = make_checkpoint(make_worked_example(refund_status="pending"))
    version = checkpoint.runbook_version
    client.force_login(adam)

    page = client.post(reverse("admin:workflows_runbook_delete", args=[runbook.pk]), {"post": "yes"})

    assert page.status_code == 200 and "Cannot delete runbook" in page.content.decode()
    with pytest.raises(ProtectedError):
        runbook.delete()
    assert Runbook.objects.filter(pk=runbook.pk).exists() and RunbookVersion.objects.filter(pk=version.pk).exists()
    checkpoint = Checkpoint.objects.get(pk=checkpoint.pk)
    assert checkpoint.runbook_version == version
    with pytest.raises(ValueError, match="does not allow"):
        Decider(checkpoint).decide(by=alice, action="handoff", handoff_to="finance")
    unknown = {e["idempotency_key"]: "did_not_happen" for e in checkpoint.unknown_effects}
    decision = Decider(checkpoint).decide(by=alice, action="resume", confirmations=unknown, money_confirmed=True)
    assert decision.status == Decision.Status.PROPOSED  # still waits for a second operator


def test_a_runbook_no_checkpoint_opened_under_can_still_be_deleted(db):
    runbook = make_runbook(workflow_kind="refund")
    runbook.delete()
    assert not RunbookVersion.objects.exists()


def test_the_live_workbench_refreshes_when_its_runbook_gets_a_newer_version(client, alice):
    runbook = make_runbook(workflow_kind="refund")
    checkpoint = make_checkpoint()
    client.force_login(alice)
    page = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()
    version = page.split('hx-vals=\'{"v": "')[1].split('"')[0]
    poll = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "workbench-live"}
    assert client.get(reverse("workbench", args=[checkpoint.pk]), {"v": version}, **poll).status_code == 204
    runbook.body = "Revised."
    runbook.save()
    answer = client.get(reverse("workbench", args=[checkpoint.pk]), {"v": version}, **poll)
    assert answer.status_code == 200 and 'data-testid="runbook-newer"' in answer.content.decode()
