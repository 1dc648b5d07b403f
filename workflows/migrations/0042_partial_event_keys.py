"""The trail's keys to a user, a checkpoint and a decision, indexed where they are set (issue 25).

A step's audit event, the row written most, has none of the three; a full index still took an entry for each
of its nulls. A lookup or a cascade asks for one value (``= x`` implies ``IS NOT NULL``), which the partial
index serves. On PostgreSQL the new indexes are built ``CONCURRENTLY`` before the old ones go, so the trail
takes writes throughout and a key is never unindexed; hence a migration outside one transaction.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

KEYS = (
    ("actor_user_id", "event_by_user"),
    ("checkpoint_id", "event_by_checkpoint"),
    ("decision_id", "event_by_decision"),
)


def _full_single_column_indexes(schema_editor, table, column):
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, table)
    return sorted(
        name
        for name, c in constraints.items()
        if c["index"] and not c["unique"] and not c["primary_key"] and c["columns"] == [column]
    )


def _build(schema_editor, name, table, column, *, partial):
    quote, concurrently = schema_editor.quote_name, ""
    if schema_editor.connection.vendor == "postgresql":
        concurrently = "CONCURRENTLY "
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(name)}")  # an earlier, cut-off try
    where = f" WHERE {quote(column)} IS NOT NULL" if partial else ""
    schema_editor.execute(f"CREATE INDEX {concurrently}{quote(name)} ON {quote(table)} ({quote(column)}){where}")


def _drop(schema_editor, name):
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {schema_editor.quote_name(name)}")


def partial_keys(apps, schema_editor):
    table = apps.get_model("workflows", "Event")._meta.db_table
    for column, name in KEYS:
        _build(schema_editor, name, table, column, partial=True)
        for old in _full_single_column_indexes(schema_editor, table, column):
            if old != name:
                _drop(schema_editor, old)


def full_keys(apps, schema_editor):
    table = apps.get_model("workflows", "Event")._meta.db_table
    for column, name in KEYS:
        old = schema_editor._create_index_name(table, [column])
        _build(schema_editor, old, table, column, partial=False)
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
            ],
            database_operations=[migrations.RunPython(partial_keys, full_keys, atomic=False)],
        ),
    ]
