"""Django admin: runbooks and agents are configured here; workflows, checkpoints,
decisions and events are shown read-mostly, since they change only through
the model's transitions (which record events)."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest

from console.roles import owner_candidates

from .models import Agent, Checkpoint, Decision, DriftIgnoreRule, Event, ReplayRun, Runbook, Step, Workflow

# A typed-in "example.com/hook" means https (Django 6's default, chosen now).
URL_FIELDS = {models.URLField: {"assume_scheme": "https"}}


@admin.register(Runbook)
class RunbookAdmin(admin.ModelAdmin):
    formfield_overrides = URL_FIELDS
    list_display = ("slug", "title", "workflow_kind", "reason", "sla_target_minutes", "sla_warning_minutes",
                    "requires_four_eyes", "four_eyes_on_every_resume", "is_default")
    list_filter = ("reason", "requires_four_eyes", "four_eyes_on_every_resume", "is_default")
    search_fields = ("slug", "title", "workflow_kind")
    prepopulated_fields = {"slug": ("title",)}
    autocomplete_fields = ("escalation_target",)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    formfield_overrides = URL_FIELDS
    list_display = ("name", "token_prefix", "owner", "resume_url", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name", "description")
    fields = ("name", "description", "resume_url", "replay_url", "allow_plain_http", "capabilities", "kinds",
              "owner", "silence_seconds", "is_active", "token_prefix", "runtime_version", "created_at")
    readonly_fields = ("token_prefix", "runtime_version", "created_at")
    actions = ("rotate_token",)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "owner":  # an agent's workflows go to someone who may act on them
            kwargs["queryset"] = owner_candidates()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        token = None
        if not change:
            obj.signing_secret = secrets.token_hex(32)
            token = obj.set_new_token()
        super().save_model(request, obj, form, change)
        if token:
            _show_token_once(request, obj, token)

    @admin.action(description="Rotate the API token of the selected agents")
    def rotate_token(self, request: HttpRequest, queryset: QuerySet) -> None:
        for agent in queryset:
            token = agent.set_new_token()
            agent.save(update_fields=["token_hash", "token_prefix"])
            _show_token_once(request, agent, token)


def _show_token_once(request: HttpRequest, agent: Agent, token: str) -> None:
    # Only the hash is stored: this message is the one chance to copy the token.
    messages.warning(request, f"API token for {agent.name} (shown once, copy it now): {token}")


class StepInline(admin.TabularInline):
    model = Step
    fields = ("seq", "name", "kind", "status", "verified", "promise", "idempotency_key", "external_ref")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows that change only through model transitions: visible, never edited here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(DriftIgnoreRule)
class DriftIgnoreRuleAdmin(admin.ModelAdmin):
    """Differences the drift finder ignores: timestamps, generated ids (glob over the dotted path)."""

    list_display = ("path", "step_kind", "workflow_kind", "note")
    list_filter = ("step_kind",)
    search_fields = ("path", "workflow_kind", "note")


@admin.register(ReplayRun)
class ReplayRunAdmin(admin.ModelAdmin):
    list_display = ("pk", "workflow", "from_seq", "to_seq", "status", "requested_by", "requested_at",
                    "first_divergent_seq")
    list_filter = ("status",)
    readonly_fields = [f.name for f in ReplayRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # replays are asked for from the workflow page, where the bounds are checked


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ("title", "kind", "agent", "owner", "status", "created_at", "last_activity_at")
    list_filter = ("status", "kind", "agent")
    search_fields = ("title", "external_id")
    list_select_related = ("agent", "owner")
    show_full_result_count = False
    inlines = (StepInline,)
    fields = ("agent", "external_id", "kind", "title", "owner", "status", "summary", "handoff_note", "context",
              "created_at", "last_activity_at", "finished_at")
    # The owner is the one thing an admin may fix by hand; the rest is the agent's record.
    readonly_fields = tuple(f for f in fields if f != "owner")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ("pk", "workflow", "reason", "status", "assignee", "opened_at", "due_at", "breached_at")
    list_filter = ("status", "reason")
    list_select_related = ("workflow", "assignee")
    search_fields = ("workflow__title", "workflow__external_id")
    show_full_result_count = False


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ("pk", "checkpoint", "action", "status", "decided_by", "approved_by", "attempts", "decided_at")
    list_filter = ("status", "action")
    list_select_related = ("checkpoint__workflow", "decided_by", "approved_by")
    show_full_result_count = False


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor_type", "actor_user", "actor_agent", "verb", "workflow", "checkpoint")
    list_filter = ("verb", "actor_type")
    list_select_related = ("actor_user", "actor_agent", "workflow", "checkpoint__workflow")
    show_full_result_count = False
    date_hierarchy = "at"
