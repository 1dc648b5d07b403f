"""What admins configure: runbooks, business calendars, SLA policies, teams, breach reasons, operator
profiles, notification channels and their deliveries, and agents (tokens and signing secrets shown once)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import IntegrityError, models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from access.rules import signed_in
from console.runbook_forms import FIELDS as RUNBOOK_FIELDS
from console.runbook_forms import RunbookForm
from workflows.models import (
    Agent,
    Attempt,
    BreachReason,
    BusinessCalendar,
    Channel,
    Delivery,
    EscalationLevel,
    Event,
    Holiday,
    OperatorProfile,
    RoutingRule,
    Runbook,
    RunbookVersion,
    SLAPolicy,
    Team,
)
from workflows.models.runbooks import ONE_DEFAULT
from workflows.roles import owner_candidates

from .audited import (
    URL_FIELDS,
    AuditedAdmin,
    ReadOnlyInline,
    _described,
)


class RunbookVersionInline(ReadOnlyInline[RunbookVersion, Runbook]):
    """The history, read-only: a version never changes once written."""

    model = RunbookVersion
    fields = ("number", "created_at", "created_by", "title")
    readonly_fields = fields


@admin.register(Runbook)
class RunbookAdmin(AuditedAdmin[Runbook]):
    """The fallback editor (the console's runbook pages are the main one): the same form and checks,
    and every save that changes the runbook writes its next version."""

    form = RunbookForm
    list_display = (
        "slug",
        "title",
        "workflow_kind",
        "reason",
        "agent",
        "priority",
        "policy",
        "owner",
        "review_by",
        "is_default",
    )
    list_filter = ("reason", "requires_four_eyes", "four_eyes_on_every_resume", "is_default", "policy")
    search_fields = ("slug", "title", "workflow_kind")
    prepopulated_fields = {"slug": ("title",)}
    list_select_related = ("policy", "agent", "owner")
    fields = RUNBOOK_FIELDS
    inlines = (RunbookVersionInline,)

    def save_model(self, request: HttpRequest, obj: Runbook, form: forms.ModelForm[Runbook], change: bool) -> None:
        obj.editor = signed_in(request)  # the author of the version this save writes
        super().save_model(request, obj, form, change)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """A default another admin saved between this form's checks and its save fails on the one-default
        constraint: checking the same form again shows the friendly message beside what was typed."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except IntegrityError:
            if not (
                request.method == "POST"
                and request.POST.get("is_default")
                and Runbook.objects.filter(is_default=True).exists()
            ):
                raise
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except IntegrityError:  # still racing: say so rather than answer 500
            self.message_user(request, ONE_DEFAULT, level=messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class HolidayInline(admin.TabularInline[Holiday, BusinessCalendar]):
    model = Holiday
    extra = 1


@admin.register(BusinessCalendar)
class BusinessCalendarAdmin(AuditedAdmin[BusinessCalendar]):
    list_display = ("name", "time_zone", "opens", "closes")
    inlines = (HolidayInline,)


class EscalationLevelInline(admin.TabularInline[EscalationLevel, SLAPolicy]):
    model = EscalationLevel
    extra = 1
    autocomplete_fields = ("user",)


@admin.register(SLAPolicy)
class SLAPolicyAdmin(AuditedAdmin[SLAPolicy]):
    list_display = ("name", "claim_target_minutes", "decision_target_minutes", "calendar", "updated_at")
    inlines = (EscalationLevelInline,)
    fieldsets = (
        (
            None,
            {
                "fields": ("name",),
                "description": "Editing a policy changes checkpoints opened from now on; open checkpoints keep "
                "the terms they opened with. The runbook preview (/runbooks/preview/) shows "
                "which runbook and policy a checkpoint would get and when it would be due.",
            },
        ),
        ("Time to claim", {"fields": ("claim_target_minutes", ("claim_warning", "claim_warning_unit"))}),
        ("Time to decision", {"fields": ("decision_target_minutes", ("decision_warning", "decision_warning_unit"))}),
        ("Hours and people", {"fields": ("calendar", "watchers", "claim_reminder_minutes", "claim_release_minutes")}),
    )


class RoutingRuleInline(admin.TabularInline[RoutingRule, Team]):
    model = RoutingRule
    extra = 1


class TeamForm(forms.ModelForm[Team]):
    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        lead, members = data.get("lead"), data.get("members")
        if lead is not None and members is not None and lead not in members:
            self.add_error("lead", "The lead must be one of the team's members.")
        return data


@admin.register(Team)
class TeamAdmin(AuditedAdmin[Team]):
    form = TeamForm
    list_display = ("name", "slug", "lead", "policy", "calendar", "watchers")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("members",)
    inlines = (RoutingRuleInline,)
    fieldsets = (
        (
            None,
            {
                "fields": ("name", "slug", "members", "lead"),
                "description": "Routing rules send checkpoints to a team when they open (the most specific rule "
                "wins, then the priority); editing them routes new checkpoints only. A checkpoint "
                "moves to another team by a transfer on its workbench.",
            },
        ),
        ("SLA and people", {"fields": ("policy", "calendar", "watchers")}),
        (
            "Slack",
            {
                "fields": ("slack_channel",),
                "description": "Its checkpoints are posted here unless their runbook has a Slack route: runbook "
                "> team > SLA policy > the workspace's default channel.",
            },
        ),
    )


@admin.register(BreachReason)
class BreachReasonAdmin(AuditedAdmin[BreachReason]):
    list_display = ("name", "description", "is_active")
    list_filter = ("is_active",)


@admin.register(OperatorProfile)
class OperatorProfileAdmin(AuditedAdmin[OperatorProfile]):
    list_display = ("user", "calendar")
    autocomplete_fields = ("user",)


@admin.register(Channel)
class ChannelAdmin(AuditedAdmin[Channel]):
    formfield_overrides = URL_FIELDS
    list_display = ("__str__", "kind", "address", "url", "slack", "is_active")
    list_filter = ("kind", "slack", "is_active")


class AttemptInline(ReadOnlyInline[Attempt, Delivery]):
    model = Attempt
    fields = ("number", "at", "ok", "status_code", "detail")
    readonly_fields = fields


@admin.register(Delivery)
class DeliveryAdmin(AuditedAdmin[Delivery]):
    list_display = ("notification", "channel", "status", "attempts", "next_attempt_at", "sent_at")
    list_filter = ("status",)
    list_select_related = ("notification", "channel__user", "channel__group")
    readonly_fields = (
        "notification",
        "channel",
        "status",
        "attempts",
        "next_attempt_at",
        "lease_expires_at",
        "last_error",
        "sent_at",
    )
    inlines = (AttemptInline,)
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class KeepWhenEmptyField(forms.IntegerField):
    """A number an admin may leave empty: empty keeps the stored value (or the default), and is no change
    for the audit trail (an older form that does not send the field changes nothing)."""

    def has_changed(self, initial: int | None, data: str | None) -> bool:
        return data not in self.empty_values and super().has_changed(initial, data)


@admin.register(Agent)
class AgentAdmin(AuditedAdmin[Agent]):
    formfield_overrides = URL_FIELDS
    list_display = ("name", "token_prefix", "owner", "resume_url", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name", "description")
    fields = (
        "name",
        "description",
        "resume_url",
        "replay_url",
        "allow_plain_http",
        "capabilities",
        "kinds",
        "owner",
        "silence_seconds",
        "incident_window_minutes",
        "incident_threshold",
        "is_active",
        "token_prefix",
        "runtime_version",
        "created_at",
    )
    readonly_fields = ("token_prefix", "runtime_version", "created_at")
    actions = ("rotate_token", "rotate_signing_secret")

    def formfield_for_foreignkey(
        self, db_field: Any, request: HttpRequest, **kwargs: Any
    ) -> forms.ModelChoiceField[models.Model] | None:
        if db_field.name == "owner":  # an agent's workflows go to someone who may act on them
            kwargs["queryset"] = owner_candidates()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_dbfield(
        self, db_field: models.Field[object, object], request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        if db_field.name in ("incident_window_minutes", "incident_threshold"):
            return KeepWhenEmptyField(
                min_value=0, required=False, label=db_field.verbose_name.capitalize(), help_text=db_field.help_text
            )
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm[Agent], change: bool) -> None:
        for name in ("incident_window_minutes", "incident_threshold"):  # left empty: as it was, else the default
            if getattr(obj, name) is None:
                stored = Agent.objects.filter(pk=obj.pk).values_list(name, flat=True).first() if change else None
                field = Agent._meta.get_field(name)
                assert isinstance(field, models.Field)
                setattr(obj, name, stored if stored is not None else field.get_default())
        if not change:
            obj.signing_secret = secrets.token_hex(32)
            request._new_credentials = [(obj, obj.set_new_token(), obj.signing_secret)]  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: Agent, post_url_continue: str | None = None) -> HttpResponse:
        credentials = getattr(request, "_new_credentials", None)
        if credentials:
            return _credentials_page(request, credentials, "created")
        return super().response_add(request, obj, post_url_continue)

    @admin.action(description="Rotate the API token of the selected agents")
    def rotate_token(self, request: HttpRequest, queryset: QuerySet[Agent]) -> HttpResponse:
        shown = []
        for agent in queryset:
            before = agent.token_prefix
            token = agent.set_new_token()
            agent.save(update_fields=["token_hash", "token_prefix"])
            Event.record(
                agent,
                Event.Verb.TOKEN_ROTATED,
                actor=signed_in(request),
                data=_described(
                    agent,
                    credential="API token",
                    before={"token_prefix": before},
                    after={"token_prefix": agent.token_prefix},
                ),
            )
            shown.append((agent, token, None))
        return _credentials_page(request, shown, "rotated")

    @admin.action(description="Rotate the signing secret of the selected agents")
    def rotate_signing_secret(self, request: HttpRequest, queryset: QuerySet[Agent]) -> HttpResponse:
        shown = []
        for agent in queryset:
            agent.signing_secret = secrets.token_hex(32)
            agent.save()
            Event.record(
                agent,
                Event.Verb.TOKEN_ROTATED,
                actor=signed_in(request),
                data=_described(agent, credential="signing secret"),
            )
            shown.append((agent, None, agent.signing_secret))
        return _credentials_page(request, shown, "rotated")


def _credentials_page(
    request: HttpRequest, credentials: Sequence[tuple[Agent, str | None, str | None]], what: str
) -> HttpResponse:
    """The one time a token or secret is shown: in this page's body, never stored in clear or in a cookie."""
    response = TemplateResponse(
        request,
        "admin/workflows/agent/credentials.html",
        {
            **admin.site.each_context(request),
            "title": f"Credentials {what}: copy them now",
            "credentials": credentials,
            "opts": Agent._meta,
        },
    )
    response["Cache-Control"] = "no-store"
    return response
