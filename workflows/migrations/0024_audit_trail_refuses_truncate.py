"""The audit trail cannot be emptied with TRUNCATE either (issue 22, finding 9).

0007's row trigger refuses UPDATE and DELETE, but TRUNCATE fires no row trigger: a role that
had been granted TRUNCATE (``GRANT ALL ON ALL TABLES …`` grants it) emptied the table. Here,
on PostgreSQL only:

- TRUNCATE is revoked on ``workflows_event`` from PUBLIC and from every role granted it, so only
  the table's owner keeps it;
- a statement trigger refuses TRUNCATE (a cascade from another table included) to any role but
  the owner, so a later ``GRANT ALL`` does not bring it back. The owner is let through because it
  can drop any trigger anyway (README, "The audit trail": run the application as a role that does
  not own the table), and because the test runner empties tables with TRUNCATE as the owner.
"""

from django.db import migrations

REVOKE_TRUNCATE = """
DO $$
DECLARE grantee_name text;
BEGIN
    REVOKE TRUNCATE ON workflows_event FROM PUBLIC;
    FOR grantee_name IN
        SELECT DISTINCT g.grantee FROM information_schema.role_table_grants g
        WHERE g.table_name = 'workflows_event' AND g.table_schema = current_schema()
          AND g.privilege_type = 'TRUNCATE' AND g.grantee <> 'PUBLIC'
          AND g.grantee <> (SELECT tableowner FROM pg_tables
                            WHERE tablename = 'workflows_event' AND schemaname = current_schema())
    LOOP
        EXECUTE format('REVOKE TRUNCATE ON workflows_event FROM %I', grantee_name);
    END LOOP;
END $$;
"""
REFUSE_TRUNCATE = """
CREATE OR REPLACE FUNCTION workflows_event_no_truncate() RETURNS trigger AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
        RETURN NULL;  -- the owner (who could drop this trigger anyway)
    END IF;
    RAISE EXCEPTION 'the audit trail is append-only: TRUNCATE on workflows_event refused'
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER workflows_event_no_truncate BEFORE TRUNCATE ON workflows_event
    FOR EACH STATEMENT EXECUTE FUNCTION workflows_event_no_truncate();
"""
ALLOW_TRUNCATE = """
DROP TRIGGER IF EXISTS workflows_event_no_truncate ON workflows_event;
DROP FUNCTION IF EXISTS workflows_event_no_truncate();
"""


def on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0023_step_carries_money'),
    ]

    operations = [
        migrations.RunPython(on_postgresql(REVOKE_TRUNCATE + REFUSE_TRUNCATE), on_postgresql(ALLOW_TRUNCATE)),
    ]
