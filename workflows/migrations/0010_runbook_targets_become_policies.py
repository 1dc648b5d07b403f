from django.db import migrations


def runbook_targets_become_policies(apps, schema_editor):
    """Each distinct (target, warning, escalation user) of the old runbooks becomes one SLA policy.

    The old escalation target ("who gets a breached checkpoint") becomes a first
    level at the breach that notifies that user and gives them the checkpoint
    unless someone already holds it. Open checkpoints get the frozen terms they
    were opened with, so their clocks do not move.
    """
    Runbook = apps.get_model("workflows", "Runbook")
    SLAPolicy = apps.get_model("workflows", "SLAPolicy")
    EscalationLevel = apps.get_model("workflows", "EscalationLevel")
    Checkpoint = apps.get_model("workflows", "Checkpoint")
    made = {}
    for runbook in Runbook.objects.select_related("escalation_target").order_by("pk"):
        key = (runbook.sla_target_minutes, runbook.sla_warning_minutes, runbook.escalation_target_id)
        if key not in made:
            target, warning, user = key
            name = f"{target} min, warn {warning} min before"
            if user:
                name += f", escalate to {runbook.escalation_target.username}"
            policy = SLAPolicy.objects.create(name=name[:100], decision_target_minutes=max(target, 1),
                                              decision_warning=min(warning, max(target - 1, 0)))
            levels = []
            if user:
                EscalationLevel.objects.create(policy=policy, delay_minutes=0, notify=True, reassign=True,
                                               user_id=user, stop_once_claimed=True)
                levels.append({"delay": 0, "notify": True, "reassign": True, "user": user, "group": None,
                               "target": runbook.escalation_target.username, "stop_once_claimed": True,
                               "every": 0, "repeats": 0})
            frozen = {"policy_id": policy.pk, "policy": policy.name, "claim_target": None, "claim_lead": 0,
                      "decision_target": policy.decision_target_minutes * 60,
                      "decision_lead": policy.decision_warning * 60, "hours": None, "calendar": None,
                      "watchers": None, "reminder": None, "release": None, "escalations": levels}
            made[key] = (policy, frozen)
        policy, frozen = made[key]
        runbook.policy = policy
        runbook.save(update_fields=["policy"])
        Checkpoint.objects.filter(runbook=runbook).update(policy=policy, sla=frozen)


class Migration(migrations.Migration):
    """Data first, then the old columns go, in separate migrations (PostgreSQL refuses to alter a table
    with pending trigger events from rows written in the same transaction)."""

    dependencies = [("workflows", "0009_sla_policies_notifications")]

    operations = [
        migrations.RunPython(runbook_targets_become_policies, migrations.RunPython.noop),
    ]
