from django.db import migrations, models

BATCH = 2000


def read_stakes(apps, schema_editor):
    """Fill ``at_stake`` for the checkpoints opened before the column, by the rule ``Checkpoint.open_for`` now
    applies (``stake_in``: workflows.money's reading, the unknown effects, the promises), in batches."""
    from workflows.models.checkpoint_money import stake_in

    Checkpoint = apps.get_model("workflows", "Checkpoint")
    rows = Checkpoint.objects.filter(at_stake__isnull=True).values_list("pk", "resume_state", "workflow__kind")
    batch = []
    for pk, resume_state, kind in rows.iterator(chunk_size=BATCH):
        state = resume_state if isinstance(resume_state, dict) else {}
        batch.append(Checkpoint(pk=pk, at_stake=stake_in(state, kind=kind)))
        if len(batch) >= BATCH:
            Checkpoint.objects.bulk_update(batch, ["at_stake"])
            batch = []
    Checkpoint.objects.bulk_update(batch, ["at_stake"])


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0039_rollout_handoff_failover"),
    ]

    operations = [
        migrations.AddField(
            model_name="checkpoint",
            name="at_stake",
            field=models.JSONField(
                blank=True,
                default=None,
                help_text="What its resume state puts at stake (stake_in), read once.",
                null=True,
            ),
        ),
        migrations.RunPython(read_stakes, migrations.RunPython.noop),
    ]
