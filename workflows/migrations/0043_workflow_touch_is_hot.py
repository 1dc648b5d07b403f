"""A step report's touch of its workflow writes no index (issue 25: fewer index entries per write).

Every step report sets its workflow's ``last_activity_at``. The silence sweep's index held that column
(``status, last_activity_at``), so each touch was an update that changed an indexed column: PostgreSQL wrote a
new entry into every index of the workflow table (seven of them) on every step. With the sweep reading the
running workflows by status alone and filtering their last activity, no index holds the column and the touch is
a HOT update (heap-only: no index entry) whenever the row's page has room; the table keeps 10 % of each page
free for that (``fillfactor``; pages written from now on). On PostgreSQL the new index is built
``CONCURRENTLY`` before the old one goes, so the table takes writes throughout; hence a migration outside one
transaction. Run again after a cut, it finishes the job.
"""

from django.db import migrations, models

TABLE = "workflows_workflow"
NEW, OLD = "workflow_by_status", "workflow_silence_scan"
FILLFACTOR = 90


def _concurrently(schema_editor):
    return "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""


def _build(schema_editor, name, columns):
    quote = schema_editor.quote_name
    schema_editor.execute(f"DROP INDEX {_concurrently(schema_editor)}IF EXISTS {quote(name)}")  # a cut-off try's
    schema_editor.execute(
        f"CREATE INDEX {_concurrently(schema_editor)}{quote(name)} ON {quote(TABLE)} "
        f"({', '.join(quote(c) for c in columns)})"
    )


def _drop(schema_editor, name):
    schema_editor.execute(f"DROP INDEX {_concurrently(schema_editor)}IF EXISTS {schema_editor.quote_name(name)}")


def by_status(apps, schema_editor):
    _build(schema_editor, NEW, ["status"])
    _drop(schema_editor, OLD)
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(TABLE)} SET (fillfactor = {FILLFACTOR})")


def by_status_and_activity(apps, schema_editor):
    _build(schema_editor, OLD, ["status", "last_activity_at"])
    _drop(schema_editor, NEW)
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(TABLE)} RESET (fillfactor)")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [("workflows", "0042_keys_indexed_where_set")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="workflow", name=OLD),
                migrations.AddIndex(model_name="workflow", index=models.Index(fields=["status"], name=NEW)),
            ],
            database_operations=[migrations.RunPython(by_status, by_status_and_activity)],
        ),
    ]
