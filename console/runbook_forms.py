"""The runbook editor's form, shared by the console's runbook pages and the Django admin.

Allowed decisions are checkboxes of the real actions, not a JSON box; the model's
``clean`` names the current default when a second one is ticked, so both editors
show the same friendly sentence instead of the constraint's name.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.utils.text import slugify

from workflows.models import Action, Agent, Reason, Runbook, SLAPolicy

FIELDS = (
    "title",
    "slug",
    "url",
    "body",
    "workflow_kind",
    "reason",
    "agent",
    "priority",
    "is_default",
    "allowed_actions",
    "requires_four_eyes",
    "four_eyes_on_every_resume",
    "policy",
    "owner",
    "review_by",
)


class RunbookForm(forms.ModelForm[Runbook]):
    allowed_actions = forms.MultipleChoiceField(
        choices=Action.choices,
        widget=forms.CheckboxSelectMultiple,
        label="Allowed decisions",
        error_messages={"required": "Choose at least one decision operators may take."},
    )
    url = forms.URLField(
        required=False,
        assume_scheme="https",
        max_length=200,
        label="Link",
        help_text="Link to the full runbook; “example.com/x” means https.",
    )
    slug = forms.SlugField(
        max_length=80,
        required=False,
        help_text="The runbook's id in links and filters; empty makes one from the title.",
    )
    review_by = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="After this date the runbook is flagged stale and its owner is told.",
    )

    class Meta:
        model = Runbook
        fields = FIELDS
        widgets = {"body": forms.Textarea(attrs={"rows": 12})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, queryset, empty in (
            ("agent", Agent.objects.order_by("name"), "any agent"),
            ("policy", SLAPolicy.objects.order_by("name"), "none: the fallback terms (30 minutes)"),
            ("owner", get_user_model().objects.filter(is_active=True).order_by("username"), "nobody"),
        ):
            field = self.fields[name]
            assert isinstance(field, forms.ModelChoiceField)
            field.queryset, field.empty_label = queryset, empty
        reason = self.fields["reason"]
        assert isinstance(reason, forms.TypedChoiceField)
        reason.choices = [("", "any reason"), *Reason.choices]
        self.fields["is_default"].label = "The default runbook"
        self.fields["requires_four_eyes"].label = "Four eyes on money"
        self.fields["four_eyes_on_every_resume"].label = "Four eyes on every resume"
        if self.instance.pk:  # a runbook's slug is its name in links and filters: fixed once made
            self.fields["slug"].disabled = True

    def clean_slug(self) -> str:
        slug: str = self.cleaned_data.get("slug") or slugify(self.cleaned_data.get("title") or "")[:80]
        if not self.instance.pk and not slug:
            raise forms.ValidationError("Give the runbook a title or a slug.")
        if not self.instance.pk and Runbook.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"Another runbook already uses the slug “{slug}”: choose another one.")
        return slug

    def clean_allowed_actions(self) -> list[str]:
        chosen = set(self.cleaned_data["allowed_actions"])
        return [a for a in Action.values if a in chosen]  # in the actions' own order: a stable version

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("url") and not (data.get("body") or "").strip() and "url" not in self.errors:
            self.add_error("body", "Give operators something to read: a link, a body, or both.")
        if not data.get("is_default") and not self.errors:
            tie = self._tie(data)
            if tie is not None:
                self.add_error(
                    "priority",
                    f"“{tie.title}” has the same match rules and priority, so which one "
                    "a checkpoint gets would be left to chance: give one a higher priority.",
                )
        return data

    def _tie(self, data: dict[str, Any]) -> Runbook | None:
        agent = data.get("agent")
        return (
            Runbook.objects.exclude(pk=self.instance.pk)
            .filter(
                is_default=False,
                workflow_kind=data.get("workflow_kind") or "",
                reason=data.get("reason") or "",
                agent=agent,
                priority=data.get("priority") or 0,
            )
            .first()
        )
