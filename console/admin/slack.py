"""Slack (workflows/slack/): connect a workspace, pick its channels, see who is linked and the messages."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from workflows.models import (
    SlackLink,
    SlackMessage,
    SlackRoute,
    SlackWorkspace,
)

from .audited import (
    AuditedAdmin,
    ReadOnlyAdmin,
)


class SlackWorkspaceForm(forms.ModelForm):  # type: ignore[type-arg]
    """The bot token and signing secret are written here and sealed; never shown again (blank keeps them)."""

    bot_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The app's Bot User OAuth Token (xoxb-…). Blank keeps the stored one.",
    )
    signing_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The app's Signing Secret (Basic Information). Blank keeps the stored one.",
    )

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


class SlackRouteInline(admin.TabularInline[SlackRoute, SlackWorkspace]):
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
    list_display = (
        "checkpoint",
        "decision",
        "channel_id",
        "ts",
        "version",
        "sent_version",
        "failures",
        "next_attempt_at",
        "last_error",
    )
    list_select_related = ("checkpoint__workflow", "decision")
