from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("workflows", "0010_runbook_targets_become_policies")]

    operations = [
        migrations.RemoveField(
            model_name='runbook',
            name='escalation_target',
        ),
        migrations.RemoveField(
            model_name='runbook',
            name='sla_target_minutes',
        ),
        migrations.RemoveField(
            model_name='runbook',
            name='sla_warning_minutes',
        ),
    ]
