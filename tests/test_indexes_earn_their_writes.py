"""Every index is written on every insert (and on every update that is not HOT): the hot tables carry none that
no query can read. An index is redundant when another full index of its table starts with the same columns
(that one serves every lookup it would), and a ``varchar_pattern_ops`` twin is dead weight where no query
asks for a prefix. Each foreign key still leads some index, so a lookup by it and a cascade stay indexed.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from django.apps import apps
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor

from tests.helpers import before_migration

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# Written on every step report, decision or delivery (issue 25: a step's audit event paid 14 indexes).
HOT_TABLES = ("workflows_step", "workflows_event", "workflows_workflow", "workflows_checkpoint", "workflows_decision")

INDEXES = """
    SELECT c.relname, i.relname, x.indisunique, COALESCE(pg_get_expr(x.indpred, x.indrelid), ''),
           ARRAY(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(attnum, ord)
                 JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum ORDER BY k.ord),
           pg_get_indexdef(i.oid) LIKE '%%pattern_ops%%'
    FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
    WHERE c.relname = ANY(%s)
"""


class Index(NamedTuple):
    table: str
    name: str
    unique: bool
    columns: list[str]
    pattern_ops: bool
    predicate: str  # "" for a full index

    @property
    def full(self) -> bool:
        return not self.predicate


def _our_models() -> list[type[models.Model]]:
    """The console's own models; Django's M2M tables (team members) are its to index."""
    return [m for m in apps.get_app_config("workflows").get_models() if not m._meta.auto_created and m._meta.managed]


def _our_tables() -> list[str]:
    return [m._meta.db_table for m in _our_models()]


def _indexes(tables: list[str]) -> list[Index]:
    with connection.cursor() as cursor:
        cursor.execute(INDEXES, [tables])
        return [Index(t, i, u, cols, pattern, pred) for t, i, u, pred, cols, pattern in cursor.fetchall()]


def test_no_index_is_a_leading_prefix_of_another_full_index_of_its_table():
    found = _indexes(_our_tables())
    assert len(found) > 100, "the catalogue query found the console's indexes"
    plain = [ix for ix in found if ix.full and not ix.pattern_ops]
    redundant = [
        (ix.table, ix.name, ix.columns, other.name)
        for ix in plain
        if not ix.unique
        for other in plain
        if other.table == ix.table and other.name != ix.name and other.columns[: len(ix.columns)] == ix.columns
    ]
    assert redundant == []


def test_the_hot_tables_carry_no_pattern_ops_twins():
    assert [(ix.table, ix.name) for ix in _indexes(list(HOT_TABLES)) if ix.pattern_ops] == []


def test_each_foreign_key_still_leads_an_index():
    """A full index, or one over the rows where the key is set: asking for one value implies IS NOT NULL."""
    leading = {
        (ix.table, ix.columns[0])
        for ix in _indexes(_our_tables())
        if ix.columns and (ix.full or ix.predicate == f"({ix.columns[0]} IS NOT NULL)")
    }
    unindexed = [
        f"{m._meta.db_table}.{f.column}"
        for m in _our_models()
        for f in m._meta.concrete_fields
        if isinstance(f, models.ForeignKey) and (m._meta.db_table, f.column) not in leading
    ]
    assert unindexed == []


def test_the_event_columns_filtered_by_equality_keep_a_plain_index():
    """actor_name and subject lost their pattern-ops twins, not their indexes: the incident page reads events by
    subject, and the trail by actor."""
    kept = {tuple(ix.columns) for ix in _indexes(["workflows_event"]) if ix.full}
    assert ("actor_name",) in kept
    assert ("subject",) in kept


def _nullable_keys_of_hot_tables() -> list[tuple[str, str]]:
    return [
        (m._meta.db_table, f.column)
        for m in _our_models()
        if m._meta.db_table in HOT_TABLES
        for f in m._meta.concrete_fields
        if isinstance(f, models.ForeignKey) and f.null
    ]


def test_a_hot_tables_nullable_key_is_indexed_where_set_or_leads_a_composite():
    """A full index of a key most rows leave empty takes an entry for each null, on every write."""
    keys = _nullable_keys_of_hot_tables()
    assert ("workflows_event", "decision_id") in keys and ("workflows_decision", "approved_by_id") in keys
    full_alone = {(ix.table, ix.columns[0]) for ix in _indexes(list(HOT_TABLES)) if ix.full and len(ix.columns) == 1}
    assert sorted(k for k in keys if k in full_alone) == []


@pytest.mark.parametrize("table, column", _nullable_keys_of_hot_tables())
def test_a_lookup_and_a_cascade_by_a_key_use_an_index(table, column):
    """The planner reads one value (a generic plan's ``= $1``, as PostgreSQL's own key checks ask it) and a
    cascade's list of them from an index, the partial one included."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # an empty test table would be scanned whatever the index
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE one_key(bigint) AS SELECT 1 FROM {table} WHERE {column} = $1")
        try:
            cursor.execute("EXPLAIN EXECUTE one_key(1)")
            one = "\n".join(r[0] for r in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE one_key")
        cursor.execute(f"EXPLAIN SELECT 1 FROM {table} WHERE {column} = ANY(%s)", [[1, 2, 3]])
        many = "\n".join(r[0] for r in cursor.fetchall())
    assert "Index" in one and "Seq Scan" not in one, one
    assert "Index" in many and "Seq Scan" not in many, many


def _index_definitions(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return dict(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
def test_the_partial_index_migration_runs_again_after_a_cut_and_backwards():
    """0042 runs outside a transaction (CREATE INDEX CONCURRENTLY): cut off halfway, it left one key done and
    another's new index built the wrong way; ``migrate`` again finishes it. Backwards gives the full indexes back."""
    executor = MigrationExecutor(connection)
    before = before_migration(executor, "_keys_indexed_where_set")
    executor.migrate(before)
    full_user_index = next(n for n, d in _index_definitions("workflows_event").items() if "(actor_user_id)" in d)
    assert "WHERE" not in _index_definitions("workflows_event")[full_user_index]
    with connection.cursor() as cursor:  # what the cut left: one key done, the next one's index half-made
        cursor.execute("CREATE INDEX event_by_user ON workflows_event (actor_user_id) WHERE actor_user_id IS NOT NULL")
        cursor.execute(f"DROP INDEX {full_user_index}")
        cursor.execute("CREATE INDEX checkpoint_by_runbook ON workflows_checkpoint (runbook_id)")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        events, checkpoints = _index_definitions("workflows_event"), _index_definitions("workflows_checkpoint")
        assert events["event_by_user"].endswith("WHERE (actor_user_id IS NOT NULL)")
        assert checkpoints["checkpoint_by_runbook"].endswith("WHERE (runbook_id IS NOT NULL)")
        assert not [d for d in checkpoints.values() if d.endswith("(runbook_id)")]  # the full one is gone

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        events, checkpoints = _index_definitions("workflows_event"), _index_definitions("workflows_checkpoint")
        assert "event_by_user" not in events and "checkpoint_by_runbook" not in checkpoints
        assert [n for n, d in events.items() if d.endswith("(actor_user_id)")] == [full_user_index]
        assert [d for d in checkpoints.values() if d.endswith("(runbook_id)")]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_no_index_of_the_workflow_table_holds_the_column_every_step_report_touches():
    """A step report sets its workflow's ``last_activity_at``: were that column in an index, the update would
    write an entry into every index of the table, on every step (migration 0043). Pages keep room for it."""
    holding = [ix.name for ix in _indexes(["workflows_workflow"]) if "last_activity_at" in ix.columns]
    assert holding == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'workflows_workflow'")
        assert "fillfactor=90" in (cursor.fetchone()[0] or [])


def test_a_step_report_touches_its_workflow_as_a_hot_update(bot, workflow_id):
    """The server's own counters for this transaction: each report updated the workflow row, and each update
    was heap-only (HOT), so no index of the workflow table took an entry."""

    def counted() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_stat_get_xact_tuples_updated(%s::regclass), "
                "pg_stat_get_xact_tuples_hot_updated(%s::regclass)",
                ["workflows_workflow", "workflows_workflow"],
            )
            updated, hot = cursor.fetchone()
            return int(updated), int(hot)

    bot.report(workflow_id, 1, "read_ticket")
    updated, hot = counted()
    for seq in (2, 3, 4):
        bot.report(workflow_id, seq, f"step_{seq}")
    after = counted()
    assert (after[0] - updated, after[1] - hot) == (3, 3)


@pytest.mark.django_db(transaction=True)
def test_the_hot_touch_migration_runs_backwards_and_again():
    executor = MigrationExecutor(connection)
    before = before_migration(executor, "_workflow_touch_is_hot")
    try:
        executor.migrate(before)
        definitions = _index_definitions("workflows_workflow")
        assert definitions["workflow_silence_scan"].endswith("(status, last_activity_at)")
        assert "workflow_by_status" not in definitions
        with connection.cursor() as cursor:  # a cut: the new index built, the old one not yet dropped
            cursor.execute("CREATE INDEX workflow_by_status ON workflows_workflow (status)")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    definitions = _index_definitions("workflows_workflow")
    assert "workflow_silence_scan" not in definitions and definitions["workflow_by_status"].endswith("(status)")
