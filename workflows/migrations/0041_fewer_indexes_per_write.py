"""Indexes no query reads, dropped: each was written on every step report and every delivery (issue 25, 23).

- ``workflows_event.workflow_id``: ``event_by_workflow`` (workflow, at) serves every lookup by workflow.
- ``workflows_checkpoint.assignee_id``: ``checkpoint_by_assignee`` (assignee, status) serves every lookup.
- ``workflows_step.workflow_id`` (``one_step_per_seq``), ``workflows_workflow.agent_id`` and ``.owner_id``, and
  every other foreign key that leads a composite or unique index of its table: that index serves it.
- The ``varchar_pattern_ops`` twins of ``workflows_event.actor_name`` and ``.subject`` (PostgreSQL): no query
  asks for a prefix of either (the admin searches ``actor_name`` with ``icontains``, which no b-tree serves,
  and ``subject`` by equality). Their plain indexes stay: on PostgreSQL they are renamed, not rebuilt (a
  rename is a catalogue change; a rebuild of the largest table would hold its writes).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# (column, the index Meta now names)
KEPT = (("actor_name", "event_actor_name"), ("subject", "event_subject"))


def _single_column_indexes(schema_editor, table: str, column: str) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, table)
    return sorted(
        name
        for name, c in constraints.items()
        if c["index"] and not c["unique"] and not c["primary_key"] and c["columns"] == [column]
    )


def keep_plain_indexes(apps, schema_editor):
    """Each column's plain index takes the name Meta gives it; its pattern-ops twin is dropped."""
    Event = apps.get_model("workflows", "Event")
    table, quote = Event._meta.db_table, schema_editor.quote_name
    for column, name in KEPT:
        existing = _single_column_indexes(schema_editor, table, column)
        twins = [n for n in existing if n.endswith("_like")]
        plain = [n for n in existing if n not in twins and n != name]
        for twin in twins:
            schema_editor.execute(f"DROP INDEX IF EXISTS {quote(twin)}")
        if name in existing:
            continue
        if plain and schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER INDEX {quote(plain[0])} RENAME TO {quote(name)}")
            plain = plain[1:]
        else:
            schema_editor.execute(f"CREATE INDEX {quote(name)} ON {quote(table)} ({quote(column)})")
        for extra in plain:
            schema_editor.execute(f"DROP INDEX IF EXISTS {quote(extra)}")


def restore_field_indexes(apps, schema_editor):
    """Backwards: the named indexes go and each column gets the indexes ``db_index=True`` gives it again."""
    Event = apps.get_model("workflows", "Event")
    quote = schema_editor.quote_name
    for column, name in KEPT:
        schema_editor.execute(f"DROP INDEX IF EXISTS {quote(name)}")
        field = Event._meta.get_field(column).clone()
        field.db_index = True
        field.set_attributes_from_name(column)
        field.model = Event
        for sql in schema_editor._field_indexes_sql(Event, field):
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0040_checkpoint_at_stake"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="workflow",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=models.deletion.CASCADE,
                related_name="events",
                to="workflows.workflow",
            ),
        ),
        migrations.AlterField(
            model_name="checkpoint",
            name="assignee",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="event", name="actor_name", field=models.CharField(blank=True, max_length=150)
                ),
                migrations.AlterField(
                    model_name="event", name="subject", field=models.CharField(blank=True, max_length=100)
                ),
                migrations.AddIndex(
                    model_name="event", index=models.Index(fields=["actor_name"], name="event_actor_name")
                ),
                migrations.AddIndex(model_name="event", index=models.Index(fields=["subject"], name="event_subject")),
            ],
            database_operations=[migrations.RunPython(keep_plain_indexes, restore_field_indexes)],
        ),
        # Foreign keys that lead a composite or unique index: that index serves their lookups and cascades.
        migrations.AlterField(
            model_name="attempt",
            name="delivery",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="attempt_log",
                to="workflows.delivery",
            ),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="notification",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="workflows.notification",
            ),
        ),
        migrations.AlterField(
            model_name="drill",
            name="series",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                editable=False,
                help_text="The recurring definition this occurrence ran under.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="occurrences",
                to="workflows.drill",
            ),
        ),
        migrations.AlterField(
            model_name="effectconfirmation",
            name="checkpoint",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="effect_confirmations",
                to="workflows.checkpoint",
            ),
        ),
        migrations.AlterField(
            model_name="holiday",
            name="calendar",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="holidays",
                to="workflows.businesscalendar",
            ),
        ),
        migrations.AlterField(
            model_name="notification",
            name="recipient",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="notifications",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="replayrun",
            name="agent",
            field=models.ForeignKey(
                db_index=False,
                help_text="The runtime asked to replay (the workflow's agent at the time).",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="replays",
                to="workflows.agent",
            ),
        ),
        migrations.AlterField(
            model_name="runbookversion",
            name="runbook",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="versions",
                to="workflows.runbook",
            ),
        ),
        migrations.AlterField(
            model_name="slacklink",
            name="workspace",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="links",
                to="workflows.slackworkspace",
            ),
        ),
        migrations.AlterField(
            model_name="slackroute",
            name="workspace",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="routes",
                to="workflows.slackworkspace",
            ),
        ),
        migrations.AlterField(
            model_name="step",
            name="workflow",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="steps",
                to="workflows.workflow",
            ),
        ),
        migrations.AlterField(
            model_name="workflow",
            name="agent",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="workflows",
                to="workflows.agent",
            ),
        ),
        migrations.AlterField(
            model_name="workflow",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="workflows",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
    ]
