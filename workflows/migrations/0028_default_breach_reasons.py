"""Seed the breach reasons a support desk starts with, so the first TPM can record one (issue 28 item 9).

Admins keep the list (Admin -> Breach reasons): a reason they renamed or retired is left alone, and a
reason already present under the same name is not touched. Unapplying removes only the seeded reasons
that no breach uses."""

from django.db import migrations

DEFAULTS = (
    ("Staffing gap", "Nobody free to claim or decide in time (shift change, queue spike, holiday)."),
    ("Runbook unclear", "The runbook did not say what to do, or said it ambiguously."),
    ("Agent bug", "The agent degraded in a way that needed investigation before a decision."),
    ("Provider outage", "The model or tool provider was down or degraded, so no safe decision existed."),
    ("Tooling", "The console, the ledgers or another operator tool got in the way."),
    ("Other", "Anything else: say what in the note."),
)


def seed(apps, schema_editor):
    BreachReason = apps.get_model("workflows", "BreachReason")
    for name, description in DEFAULTS:
        BreachReason.objects.get_or_create(name=name, defaults={"description": description})


def unseed(apps, schema_editor):
    BreachReason = apps.get_model("workflows", "BreachReason")
    BreachReason.objects.filter(name__in=[name for name, _ in DEFAULTS], checkpoints__isnull=True).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("workflows", "0027_handoff_notification"),
    ]

    operations = [migrations.RunPython(seed, unseed)]
