"""Django admin: runbooks, agents and users are configured here; workflows, checkpoints,
decisions and events are shown read-mostly, since they change only through
the model's transitions (which record events).

The admin is a screen, so it lives with the screens in ``console/`` (it registers the
``workflows`` models; their URLs stay /admin/workflows/…): it shares the runbook form with
the console's runbook editor, and the domain below knows neither.

Every change made here is an audit event: every model registered, ours and the libraries'
(auth's groups, axes's lockouts), has an ``AuditedAdmin``, so adding, changing or deleting
a row, its inline rows included, records who, what, and the fields before and after
(``tests/test_admin_audit.py`` walks the registry). A password an admin sets for someone is
an event too, without the password. New API tokens and signing secrets are shown once, in the body of
the page that made them, never in a message (messages ride in a readable cookie).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, models, transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.template.response import TemplateResponse

from access.rules import signed_in
from console.csv_export import stream_csv
from console.runbook_forms import FIELDS as RUNBOOK_FIELDS
from console.runbook_forms import RunbookForm
from workflows.models import (
    Agent,
    Attempt,
    BreachReason,
    BusinessCalendar,
    Channel,
    Checkpoint,
    Decision,
    Delivery,
    DriftIgnoreRule,
    Drill,
    EscalationLevel,
    Event,
    Hold,
    Holiday,
    Incident,
    OperatorProfile,
    ReplayRun,
    Rollout,
    RoutingRule,
    Runbook,
    RunbookVersion,
    SignInIdentity,
    SlackLink,
    SlackMessage,
    SlackRoute,
    SlackWorkspace,
    SLAPolicy,
    Step,
    Team,
    Workflow,
)
from workflows.models.events import plain
from workflows.models.runbooks import ONE_DEFAULT
from workflows.roles import owner_candidates

_M = TypeVar("_M", bound=models.Model)

# A typed-in "example.com/hook" means https (Django 6's default, chosen now).
URL_FIELDS: Mapping[type[models.Field[Any, Any]], Mapping[str, Any]] = {models.URLField: {"assume_scheme": "https"}}
SECRET_FIELDS = ("password", "secret", "token")  # never copied into the trail


def _value(instance: Any, name: str) -> Any:
    """A field's value as the trail keeps it: names rather than ids, a many-to-many as sorted names."""
    value = getattr(instance, name, None)  # a field's value, or its many-to-many manager
    if value is not None and hasattr(value, "all"):
        return sorted(str(v) for v in value.all())
    return plain(value)  # Event.record's one encoder: lazy strings, dates, times, decimals, rows


class AuditedAdmin(admin.ModelAdmin[_M]):
    """Creations, changes and deletions made here are audit events with the actor and before/after."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        fields = [f for f in form.changed_data if not any(word in f for word in SECRET_FIELDS)]
        stored = type(obj)._default_manager.filter(pk=obj.pk).first() if change else None
        before = {f: _value(stored, f) for f in fields} if stored is not None else {}
        super().save_model(request, obj, form, change)
        request._audited = (obj, change, fields, before)  # type: ignore[attr-defined]  # per request, not self

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)  # many-to-many values (a user's groups) land here
        obj, change, fields, before = request._audited  # type: ignore[attr-defined]
        inline = _inline_changes(formsets)  # an SLA policy's escalation levels, a calendar's holidays
        if change and not fields and not inline:
            return
        extra = {"inlines": inline} if inline else {}
        Event.record(obj, Event.Verb.ADMIN_CHANGED if change else Event.Verb.ADMIN_CREATED, actor=signed_in(request),
                     data=_described(obj, before=before, after={f: _value(obj, f) for f in fields}, **extra))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        Event.record(obj, Event.Verb.ADMIN_DELETED, actor=signed_in(request), data=_described(obj))
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset:
            Event.record(obj, Event.Verb.ADMIN_DELETED, actor=signed_in(request), data=_described(obj))
        super().delete_queryset(request, queryset)


def _inline_changes(formsets: Any) -> list[str]:
    """What the inline rows saved with the parent did, in words (the rows' own fields are not copied)."""
    done = []
    for formset in formsets:
        done += [f"added {o}" for o in getattr(formset, "new_objects", ())]
        done += [f"changed {o}: {', '.join(f)}" for o, f in getattr(formset, "changed_objects", ())]
        done += [f"deleted {o}" for o in getattr(formset, "deleted_objects", ())]
    return done


def _described(obj: Any, **changes: Any) -> dict[str, Any]:
    return {"model": obj._meta.verbose_name, "object": str(obj)[:200], **changes}


def _audited(base: type[admin.ModelAdmin[Any]]) -> type[admin.ModelAdmin[Any]]:
    """A library's admin class with the trail: the same pages, every save and deletion recorded."""
    return type(f"Audited{base.__name__}", (AuditedAdmin, base), {"__module__": __name__})


class ReadOnlyInline(admin.TabularInline[Any, Any]):
    """Rows the admin shows beside their parent and never adds, edits or deletes there."""

    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RunbookVersionInline(ReadOnlyInline):
    """The history, read-only: a version never changes once written."""

    model = RunbookVersion
    fields = ("number", "created_at", "created_by", "title")
    readonly_fields = fields


@admin.register(Runbook)
class RunbookAdmin(AuditedAdmin[Runbook]):
    """The fallback editor (the console's runbook pages are the main one): the same form and checks,
    and every save that changes the runbook writes its next version."""

    form = RunbookForm
    list_display = ("slug", "title", "workflow_kind", "reason", "agent", "priority", "policy", "owner", "review_by",
                    "is_default")
    list_filter = ("reason", "requires_four_eyes", "four_eyes_on_every_resume", "is_default", "policy")
    search_fields = ("slug", "title", "workflow_kind")
    prepopulated_fields = {"slug": ("title",)}
    list_select_related = ("policy", "agent", "owner")
    fields = RUNBOOK_FIELDS
    inlines = (RunbookVersionInline,)

    def save_model(self, request: HttpRequest, obj: Runbook, form: Any, change: bool) -> None:
        obj.editor = signed_in(request)  # the author of the version this save writes
        super().save_model(request, obj, form, change)

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """A default another admin saved between this form's checks and its save fails on the one-default
        constraint: checking the same form again shows the friendly message beside what was typed."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except IntegrityError:
            if not (request.method == "POST" and request.POST.get("is_default")
                    and Runbook.objects.filter(is_default=True).exists()):
                raise
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except IntegrityError:  # still racing: say so rather than answer 500
            self.message_user(request, ONE_DEFAULT, level=messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class HolidayInline(admin.TabularInline[Any, Any]):
    model = Holiday
    extra = 1


@admin.register(BusinessCalendar)
class BusinessCalendarAdmin(AuditedAdmin[BusinessCalendar]):
    list_display = ("name", "time_zone", "opens", "closes")
    inlines = (HolidayInline,)


class EscalationLevelInline(admin.TabularInline[Any, Any]):
    model = EscalationLevel
    extra = 1
    autocomplete_fields = ("user",)


@admin.register(SLAPolicy)
class SLAPolicyAdmin(AuditedAdmin[SLAPolicy]):
    list_display = ("name", "claim_target_minutes", "decision_target_minutes", "calendar", "updated_at")
    inlines = (EscalationLevelInline,)
    fieldsets = (
        (None, {"fields": ("name",),
                "description": "Editing a policy changes checkpoints opened from now on; open checkpoints keep "
                               "the terms they opened with. The runbook preview (/runbooks/preview/) shows "
                               "which runbook and policy a checkpoint would get and when it would be due."}),
        ("Time to claim", {"fields": ("claim_target_minutes", ("claim_warning", "claim_warning_unit"))}),
        ("Time to decision", {"fields": ("decision_target_minutes", ("decision_warning", "decision_warning_unit"))}),
        ("Hours and people", {"fields": ("calendar", "watchers", "claim_reminder_minutes",
                                         "claim_release_minutes")}),
    )


class RoutingRuleInline(admin.TabularInline[Any, Any]):
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
        (None, {"fields": ("name", "slug", "members", "lead"),
                "description": "Routing rules send checkpoints to a team when they open (the most specific rule "
                               "wins, then the priority); editing them routes new checkpoints only. A checkpoint "
                               "moves to another team by a transfer on its workbench."}),
        ("SLA and people", {"fields": ("policy", "calendar", "watchers")}),
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


class AttemptInline(ReadOnlyInline):
    model = Attempt
    fields = ("number", "at", "ok", "status_code", "detail")
    readonly_fields = fields


@admin.register(Delivery)
class DeliveryAdmin(AuditedAdmin[Delivery]):
    list_display = ("notification", "channel", "status", "attempts", "next_attempt_at", "sent_at")
    list_filter = ("status",)
    list_select_related = ("notification", "channel__user", "channel__group")
    readonly_fields = ("notification", "channel", "status", "attempts", "next_attempt_at", "lease_expires_at",
                       "last_error", "sent_at")
    inlines = (AttemptInline,)
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class KeepWhenEmptyField(forms.IntegerField):
    """A number an admin may leave empty: empty keeps the stored value (or the default), and is no change
    for the audit trail (an older form that does not send the field changes nothing)."""

    def has_changed(self, initial: Any, data: Any) -> bool:
        return data not in self.empty_values and super().has_changed(initial, data)


@admin.register(Agent)
class AgentAdmin(AuditedAdmin[Agent]):
    formfield_overrides = URL_FIELDS
    list_display = ("name", "token_prefix", "owner", "resume_url", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name", "description")
    fields = ("name", "description", "resume_url", "replay_url", "allow_plain_http", "capabilities", "kinds",
              "owner", "silence_seconds", "incident_window_minutes", "incident_threshold", "is_active", "token_prefix",
              "runtime_version", "created_at")
    readonly_fields = ("token_prefix", "runtime_version", "created_at")
    actions = ("rotate_token", "rotate_signing_secret")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "owner":  # an agent's workflows go to someone who may act on them
            kwargs["queryset"] = owner_candidates()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in ("incident_window_minutes", "incident_threshold"):
            return KeepWhenEmptyField(min_value=0, required=False, label=db_field.verbose_name.capitalize(),
                                      help_text=db_field.help_text)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
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

    def response_add(self, request: HttpRequest, obj: Agent, post_url_continue: Any = None) -> HttpResponse:
        credentials = getattr(request, "_new_credentials", None)
        if credentials:
            return _credentials_page(request, credentials, "created")
        return super().response_add(request, obj, post_url_continue)

    @admin.action(description="Rotate the API token of the selected agents")
    def rotate_token(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse:
        shown = []
        for agent in queryset:
            before = agent.token_prefix
            token = agent.set_new_token()
            agent.save(update_fields=["token_hash", "token_prefix"])
            Event.record(agent, Event.Verb.TOKEN_ROTATED, actor=signed_in(request), data=_described(
                agent, credential="API token", before={"token_prefix": before}, after={"token_prefix": agent.token_prefix}))
            shown.append((agent, token, None))
        return _credentials_page(request, shown, "rotated")

    @admin.action(description="Rotate the signing secret of the selected agents")
    def rotate_signing_secret(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse:
        shown = []
        for agent in queryset:
            agent.signing_secret = secrets.token_hex(32)
            agent.save()
            Event.record(agent, Event.Verb.TOKEN_ROTATED, actor=signed_in(request),
                         data=_described(agent, credential="signing secret"))
            shown.append((agent, None, agent.signing_secret))
        return _credentials_page(request, shown, "rotated")


def _credentials_page(request: HttpRequest, credentials: Sequence[tuple[Agent, str | None, str | None]],
                      what: str) -> HttpResponse:
    """The one time a token or secret is shown: in this page's body, never stored in clear or in a cookie."""
    response = TemplateResponse(request, "admin/workflows/agent/credentials.html", {
        **admin.site.each_context(request), "title": f"Credentials {what}: copy them now",
        "credentials": credentials, "opts": Agent._meta})
    response["Cache-Control"] = "no-store"
    return response


class StepInline(ReadOnlyInline):
    model = Step
    fields = ("seq", "name", "kind", "status", "verified", "promise", "idempotency_key", "external_ref")
    readonly_fields = fields


class ReadOnlyAdmin(AuditedAdmin[_M]):
    """Rows that change only through model transitions: visible, never edited here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(DriftIgnoreRule)
class DriftIgnoreRuleAdmin(AuditedAdmin[DriftIgnoreRule]):
    """Differences the drift finder ignores: timestamps, generated ids (glob over the dotted path)."""

    list_display = ("path", "step_kind", "workflow_kind", "note")
    list_filter = ("step_kind",)
    search_fields = ("path", "workflow_kind", "note")


@admin.register(ReplayRun)
class ReplayRunAdmin(AuditedAdmin[ReplayRun]):
    list_display = ("pk", "workflow", "from_seq", "to_seq", "status", "requested_by", "requested_at",
                    "first_divergent_seq")
    list_filter = ("status",)
    readonly_fields = [f.name for f in ReplayRun._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # replays are asked for from the workflow page, where the bounds are checked


@admin.register(Drill)
class DrillAdmin(AuditedAdmin[Drill]):
    """Recovery drills (workflows/models/drills.py); TPMs define and start them on the console's Drills page."""

    list_display = ("name", "agent", "kind", "fault", "at_seq", "runs", "share_percent", "announced", "status",
                    "picked", "next_run_at")
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
    fields = ("agent", "external_id", "kind", "title", "owner", "status", "summary", "handoff_note", "context",
              "created_at", "last_activity_at", "finished_at")
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
    def export_csv(self, request: HttpRequest, queryset: QuerySet[Any]) -> StreamingHttpResponse:
        return stream_csv(_csv_rows(queryset.order_by("at", "pk")), "audit-trail.csv")


CSV_COLUMNS = ("id", "at", "actor_type", "actor_name", "verb", "subject", "workflow_id", "checkpoint_id",
               "decision_id", "data")


def _csv_rows(queryset: QuerySet[Any]) -> Iterator[list[Any]]:
    import json

    yield list(CSV_COLUMNS)
    for event in queryset.iterator(chunk_size=2000):
        yield [event.pk, event.at.isoformat(), event.actor_type, event.actor_name, event.verb, event.subject,
               event.workflow_id, event.checkpoint_id, event.decision_id, json.dumps(event.data, sort_keys=True)]


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
                Event.record(user, Event.Verb.ADMIN_CHANGED, actor=signed_in(request), data=_described(
                    user, before={"password": "(hidden)"},
                    after={"password": "(changed)" if user.has_usable_password() else "(disabled)"}))
        return response


# The libraries' own registrations get the trail too: auth's groups (the roles) and axes's
# lockout records (deleting one unlocks an account).
for _model, _model_admin in list(admin.site._registry.items()):
    if _model._meta.app_label in ("auth", "axes") and not isinstance(_model_admin, AuditedAdmin):
        admin.site.unregister(_model)
        admin.site.register(_model, _audited(type(_model_admin)))


# --- Slack (workflows/slack/): connect a workspace, pick its channels, see who is linked and the messages ---

class SlackWorkspaceForm(forms.ModelForm):  # type: ignore[type-arg]
    """The bot token and signing secret are written here and sealed; never shown again (blank keeps them)."""

    bot_token = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                                help_text="The app's Bot User OAuth Token (xoxb-…). Blank keeps the stored one.")
    signing_secret = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                                     help_text="The app's Signing Secret (Basic Information). Blank keeps the stored one.")

    class Meta:
        model = SlackWorkspace
        fields = ("team_id", "name", "default_channel", "is_active")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in ("bot_token", "signing_secret"):
            if not data.get(name) and not getattr(self.instance, f"sealed_{name}", ""):
                self.add_error(name, "Required to connect the workspace.")
        return data

    def save(self, commit: bool = True) -> Any:
        for name in ("bot_token", "signing_secret"):
            if self.cleaned_data.get(name):
                setattr(self.instance, name, self.cleaned_data[name])
        return super().save(commit)


class SlackRouteInline(admin.TabularInline[Any, Any]):
    model = SlackRoute
    extra = 1


@admin.register(SlackWorkspace)
class SlackWorkspaceAdmin(AuditedAdmin[SlackWorkspace]):
    form = SlackWorkspaceForm
    list_display = ("name", "team_id", "default_channel", "is_active", "connected_at")
    inlines = (SlackRouteInline,)


@admin.register(SlackLink)
class SlackLinkAdmin(AuditedAdmin[SlackLink]):
    """Links are made by the person from Slack (a one-time link); an admin may only remove one."""

    list_display = ("slack_user_id", "user", "workspace", "linked_at")
    readonly_fields = ("workspace", "slack_user_id", "user", "linked_at", "nonce")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(SlackMessage)
class SlackMessageAdmin(ReadOnlyAdmin[SlackMessage]):
    list_display = ("checkpoint", "decision", "channel_id", "ts", "version", "sent_version", "failures",
                    "next_attempt_at", "last_error")
    list_select_related = ("checkpoint__workflow", "decision")
