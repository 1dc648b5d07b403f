"""Rows that change only through the model's transitions, shown read-mostly (workflows, checkpoints,
incidents, decisions, events…), and the users, auth's groups and axes's lockouts with the audit trail."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from access.rules import signed_in
from console.csv_export import Cell, stream_csv
from workflows.models import (
    Checkpoint,
    Decision,
    DriftIgnoreRule,
    Drill,
    Event,
    Hold,
    Incident,
    ReplayRun,
    Rollout,
    SignInIdentity,
    Step,
    Workflow,
)

from .audited import (
    AuditedAdmin,
    ReadOnlyAdmin,
    ReadOnlyInline,
    _audited,
    _described,
)


class StepInline(ReadOnlyInline[Step, Workflow]):
    model = Step
    fields = ("seq", "name", "kind", "status", "verified", "promise", "idempotency_key", "external_ref")
    readonly_fields = fields


@admin.register(DriftIgnoreRule)
class DriftIgnoreRuleAdmin(AuditedAdmin[DriftIgnoreRule]):
    """Differences the drift finder ignores: timestamps, generated ids (glob over the dotted path)."""

    list_display = ("path", "step_kind", "workflow_kind", "note")
    list_filter = ("step_kind",)
    search_fields = ("path", "workflow_kind", "note")


@admin.register(ReplayRun)
class ReplayRunAdmin(AuditedAdmin[ReplayRun]):
    list_display = (
        "pk",
        "workflow",
        "from_seq",
        "to_seq",
        "status",
        "requested_by",
        "requested_at",
        "first_divergent_seq",
    )
    list_filter = ("status",)
    readonly_fields = [f.name for f in ReplayRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # replays are asked for from the workflow page, where the bounds are checked


@admin.register(Drill)
class DrillAdmin(AuditedAdmin[Drill]):
    """Recovery drills (workflows/models/drills.py); TPMs define and start them on the console's Drills page."""

    list_display = (
        "name",
        "agent",
        "kind",
        "fault",
        "at_seq",
        "runs",
        "share_percent",
        "announced",
        "status",
        "picked",
        "next_run_at",
    )
    list_filter = ("status", "fault", "announced")
    search_fields = ("name", "kind")
    readonly_fields = ("status", "picked", "started_at", "ends_at", "created_at")


@admin.register(Workflow)
class WorkflowAdmin(AuditedAdmin[Workflow]):
    list_display = ("title", "kind", "agent", "owner", "status", "created_at", "last_activity_at")
    list_filter = ("status", "kind", "agent")
    search_fields = ("title", "external_id")
    list_select_related = ("agent", "owner")
    show_full_result_count = False
    inlines = (StepInline,)
    fields = (
        "agent",
        "external_id",
        "kind",
        "title",
        "owner",
        "status",
        "summary",
        "handoff_note",
        "context",
        "created_at",
        "last_activity_at",
        "finished_at",
    )
    # The owner is the one thing an admin may fix by hand; the rest is the agent's record.
    readonly_fields = tuple(f for f in fields if f != "owner")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(SignInIdentity)
class SignInIdentityAdmin(ReadOnlyAdmin[SignInIdentity]):
    """Who signs in through the provider as whom (issuer and subject): written by single sign-on only."""

    list_display = ("user", "issuer", "subject", "created_at", "last_sign_in_at")
    search_fields = ("user__username", "subject")


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin[Checkpoint]):
    list_display = ("pk", "workflow", "reason", "status", "assignee", "opened_at", "due_at", "breached_at")
    list_filter = ("status", "reason")
    list_select_related = ("workflow", "assignee")
    search_fields = ("workflow__title", "workflow__external_id")
    show_full_result_count = False


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin[Incident]):
    """Read-only: incidents change on their page (/incidents/<id>/), where every change is an event."""

    list_display = ("pk", "title", "agent", "status", "commander", "opened_at", "resolved_at")
    list_filter = ("status",)
    list_select_related = ("agent", "commander")
    search_fields = ("title", "agent__name", "kind")


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdmin[Hold]):
    """Read-only: holds are placed and lifted from the incident page, audited there."""

    list_display = ("pk", "agent", "kind", "status", "new_workflows", "placed_by", "placed_at", "lifted_at")
    list_filter = ("status",)
    list_select_related = ("agent", "placed_by")


@admin.register(Rollout)
class RolloutAdmin(ReadOnlyAdmin[Rollout]):
    """Read-only: rollouts start, halt and stop on the incident page and in the sweep, audited there."""

    list_display = ("pk", "incident", "action", "status", "started_by", "started_at")
    list_filter = ("status",)


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin[Decision]):
    list_display = ("pk", "checkpoint", "action", "status", "decided_by", "approved_by", "attempts", "decided_at")
    list_filter = ("status", "action")
    list_select_related = ("checkpoint__workflow", "decided_by", "approved_by")
    show_full_result_count = False


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin[Event]):
    """The audit trail: browse and filter by actor, object and verb; export what is selected as CSV."""

    list_display = ("at", "actor_type", "actor_name", "verb", "subject", "workflow", "checkpoint")
    list_filter = ("verb", "actor_type")
    search_fields = ("actor_name", "=subject", "workflow__external_id")
    search_help_text = "An actor's name, an object as model:id (workflow:12, agent:3), or a ticket's external id."
    list_select_related = ("workflow", "checkpoint__workflow")
    show_full_result_count = False
    date_hierarchy = "at"
    actions = ("export_csv",)

    @admin.action(description="Export the selected events as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[Event]) -> StreamingHttpResponse:
        return stream_csv(_csv_rows(queryset.order_by("at", "pk")), "audit-trail.csv")


CSV_COLUMNS = (
    "id",
    "at",
    "actor_type",
    "actor_name",
    "verb",
    "subject",
    "workflow_id",
    "checkpoint_id",
    "decision_id",
    "data",
)


def _csv_rows(queryset: QuerySet[Event]) -> Iterator[list[Cell]]:
    import json

    yield list(CSV_COLUMNS)
    for event in queryset.iterator(chunk_size=2000):
        yield [
            event.pk,
            event.at.isoformat(),
            event.actor_type,
            event.actor_name,
            event.verb,
            event.subject,
            event.workflow_id,
            event.checkpoint_id,
            event.decision_id,
            json.dumps(event.data, sort_keys=True),
        ]


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class AuditedUserAdmin(AuditedAdmin[AbstractUser], UserAdmin[AbstractUser]):
    """Role and account changes are audit events; someone who ever acted is deactivated, never deleted."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and Event.objects.filter(actor_user=obj).exists():
            return False
        return super().has_delete_permission(request, obj)

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        """An admin setting (or disabling) someone's password is an event; the password never is in it."""
        stored = User._default_manager.filter(pk=unquote(id)).values_list("password", flat=True)
        with transaction.atomic():
            before = stored.first()
            response = super().user_change_password(request, id, form_url)
            if before is not None and stored.first() != before:
                user = User._default_manager.get(pk=unquote(id))
                Event.record(
                    user,
                    Event.Verb.ADMIN_CHANGED,
                    actor=signed_in(request),
                    data=_described(
                        user,
                        before={"password": "(hidden)"},
                        after={"password": "(changed)" if user.has_usable_password() else "(disabled)"},
                    ),
                )
        return response


# The libraries' own registrations get the trail too: auth's groups (the roles) and axes's
# lockout records (deleting one unlocks an account).
for _model, _model_admin in list(admin.site._registry.items()):
    if _model._meta.app_label in ("auth", "axes") and not isinstance(_model_admin, AuditedAdmin):
        admin.site.unregister(_model)
        admin.site.register(_model, _audited(type(_model_admin)))
