"""Keys most rows leave empty, indexed where they are set (issue 25: fewer index entries per write).

A step's audit event, the row written most, has no user, checkpoint or decision; a resume decision no new
owner, approver or standby; most checkpoints no breach reason, origin or incident. A full index still took an
entry for each of those nulls on every insert and on every update that is not HOT. A lookup or a cascade asks
for one value (``= x`` implies ``IS NOT NULL``), which the partial index serves. On PostgreSQL each new index
is built ``CONCURRENTLY`` before the old one goes, so the tables take writes throughout and no key is ever
unindexed; hence a migration outside one transaction.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# (model, field, the partial index Meta names)
KEYS = (
    ("checkpoint", "runbook", "checkpoint_by_runbook"),
    ("checkpoint", "runbook_version", "checkpoint_by_runbook_version"),
    ("checkpoint", "policy", "checkpoint_by_policy"),
    ("checkpoint", "breach_reason", "checkpoint_by_breach_reason"),
    ("checkpoint", "origin", "checkpoint_by_origin"),
    ("checkpoint", "team", "checkpoint_by_team"),
    ("checkpoint", "incident", "checkpoint_by_incident"),
    ("decision", "new_owner", "decision_by_new_owner"),
    ("decision", "approved_by", "decision_by_approver"),
    ("decision", "standby", "decision_by_standby"),
    ("decision", "replaced_agent", "decision_by_replaced_agent"),
    ("event", "actor_agent", "event_by_agent"),
    ("event", "actor_user", "event_by_user"),
    ("event", "checkpoint", "event_by_checkpoint"),
    ("event", "decision", "event_by_decision"),
    ("workflow", "drill", "workflow_by_drill"),
    ("workflow", "forked_from", "workflow_by_fork_parent"),
)


def _full_single_column_indexes(schema_editor, table, column):
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, table)
    return sorted(
        name
        for name, c in constraints.items()
        if c["index"] and not c["unique"] and not c["primary_key"] and c["columns"] == [column]
    )


def _concurrently(schema_editor):
    return "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""


def _build(schema_editor, name, table, column, *, partial):
    quote = schema_editor.quote_name
    schema_editor.execute(f"DROP INDEX {_concurrently(schema_editor)}IF EXISTS {quote(name)}")  # a cut-off try's
    where = f" WHERE {quote(column)} IS NOT NULL" if partial else ""
    schema_editor.execute(
        f"CREATE INDEX {_concurrently(schema_editor)}{quote(name)} ON {quote(table)} ({quote(column)}){where}"
    )


def _drop(schema_editor, name):
    schema_editor.execute(f"DROP INDEX {_concurrently(schema_editor)}IF EXISTS {schema_editor.quote_name(name)}")


def _columns(apps):
    for model_name, field, name in KEYS:
        model = apps.get_model("workflows", model_name)
        yield model._meta.db_table, model._meta.get_field(field).column, name


def where_set(apps, schema_editor):
    for table, column, name in _columns(apps):
        _build(schema_editor, name, table, column, partial=True)
        for old in _full_single_column_indexes(schema_editor, table, column):
            if old != name:
                _drop(schema_editor, old)


def everywhere(apps, schema_editor):
    for table, column, name in _columns(apps):
        _build(schema_editor, schema_editor._create_index_name(table, [column]), table, column, partial=False)
        _drop(schema_editor, name)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("workflows", "0041_fewer_indexes_per_write"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="checkpoint",
                    name="breach_reason",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="checkpoints",
                        to="workflows.breachreason",
                    ),
                ),
                migrations.AlterField(
                    model_name="checkpoint",
                    name="incident",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="members",
                        to="workflows.incident",
                    ),
                ),
                migrations.AlterField(
                    model_name="checkpoint",
                    name="origin",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="workflows.checkpoint",
                    ),
                ),
                migrations.AlterField(
                    model_name="checkpoint",
                    name="policy",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="workflows.slapolicy",
                    ),
                ),
                migrations.AlterField(
                    model_name="checkpoint",
                    name="runbook",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="workflows.runbook",
                    ),
                ),
                migrations.AlterField(
                    model_name="checkpoint",
                    name="runbook_version",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="checkpoints",
                        to="workflows.runbookversion",
                    ),
                ),
                migrations.AlterField(
                    model_name="checkpoint",
                    name="team",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="checkpoints",
                        to="workflows.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="decision",
                    name="approved_by",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="decision",
                    name="new_owner",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="decision",
                    name="replaced_agent",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="Failover: the agent told to stand down.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="workflows.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="decision",
                    name="standby",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="Failover: the standby agent that takes the workflow over.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="workflows.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="event",
                    name="actor_agent",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="workflows.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="event",
                    name="actor_user",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="event",
                    name="checkpoint",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="workflows.checkpoint",
                    ),
                ),
                migrations.AlterField(
                    model_name="event",
                    name="decision",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="workflows.decision",
                    ),
                ),
                migrations.AlterField(
                    model_name="workflow",
                    name="drill",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="workflows",
                        to="workflows.drill",
                    ),
                ),
                migrations.AlterField(
                    model_name="workflow",
                    name="forked_from",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="The workflow this one was forked from.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="forks",
                        to="workflows.workflow",
                    ),
                ),
                migrations.AddIndex(
                    model_name="checkpoint",
                    index=models.Index(
                        condition=models.Q(("runbook__isnull", False)), fields=["runbook"], name="checkpoint_by_runbook"
                    ),
                ),
                migrations.AddIndex(
                    model_name="checkpoint",
                    index=models.Index(
                        condition=models.Q(("runbook_version__isnull", False)),
                        fields=["runbook_version"],
                        name="checkpoint_by_runbook_version",
                    ),
                ),
                migrations.AddIndex(
                    model_name="checkpoint",
                    index=models.Index(
                        condition=models.Q(("policy__isnull", False)), fields=["policy"], name="checkpoint_by_policy"
                    ),
                ),
                migrations.AddIndex(
                    model_name="checkpoint",
                    index=models.Index(
                        condition=models.Q(("breach_reason__isnull", False)),
                        fields=["breach_reason"],
                        name="checkpoint_by_breach_reason",
                    ),
                ),
                migrations.AddIndex(
                    model_name="checkpoint",
                    index=models.Index(
                        condition=models.Q(("origin__isnull", False)), fields=["origin"], name="checkpoint_by_origin"
                    ),
                ),
                migrations.AddIndex(
                    model_name="checkpoint",
                    index=models.Index(
                        condition=models.Q(("team__isnull", False)), fields=["team"], name="checkpoint_by_team"
                    ),
                ),
                migrations.AddIndex(
                    model_name="checkpoint",
                    index=models.Index(
                        condition=models.Q(("incident__isnull", False)),
                        fields=["incident"],
                        name="checkpoint_by_incident",
                    ),
                ),
                migrations.AddIndex(
                    model_name="decision",
                    index=models.Index(
                        condition=models.Q(("new_owner__isnull", False)),
                        fields=["new_owner"],
                        name="decision_by_new_owner",
                    ),
                ),
                migrations.AddIndex(
                    model_name="decision",
                    index=models.Index(
                        condition=models.Q(("approved_by__isnull", False)),
                        fields=["approved_by"],
                        name="decision_by_approver",
                    ),
                ),
                migrations.AddIndex(
                    model_name="decision",
                    index=models.Index(
                        condition=models.Q(("standby__isnull", False)), fields=["standby"], name="decision_by_standby"
                    ),
                ),
                migrations.AddIndex(
                    model_name="decision",
                    index=models.Index(
                        condition=models.Q(("replaced_agent__isnull", False)),
                        fields=["replaced_agent"],
                        name="decision_by_replaced_agent",
                    ),
                ),
                migrations.AddIndex(
                    model_name="event",
                    index=models.Index(
                        condition=models.Q(("actor_agent__isnull", False)),
                        fields=["actor_agent"],
                        name="event_by_agent",
                    ),
                ),
                migrations.AddIndex(
                    model_name="event",
                    index=models.Index(
                        condition=models.Q(("actor_user__isnull", False)), fields=["actor_user"], name="event_by_user"
                    ),
                ),
                migrations.AddIndex(
                    model_name="event",
                    index=models.Index(
                        condition=models.Q(("checkpoint__isnull", False)),
                        fields=["checkpoint"],
                        name="event_by_checkpoint",
                    ),
                ),
                migrations.AddIndex(
                    model_name="event",
                    index=models.Index(
                        condition=models.Q(("decision__isnull", False)), fields=["decision"], name="event_by_decision"
                    ),
                ),
                migrations.AddIndex(
                    model_name="workflow",
                    index=models.Index(
                        condition=models.Q(("drill__isnull", False)), fields=["drill"], name="workflow_by_drill"
                    ),
                ),
                migrations.AddIndex(
                    model_name="workflow",
                    index=models.Index(
                        condition=models.Q(("forked_from__isnull", False)),
                        fields=["forked_from"],
                        name="workflow_by_fork_parent",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(where_set, everywhere, atomic=False)],
        ),
    ]
