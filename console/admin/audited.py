"""The audit base of every admin page: ``AuditedAdmin`` records each add, change and deletion (inline rows
included) as an audit event, with the fields before and after and never a secret."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from django import forms
from django.contrib import admin
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest

from access.rules import signed_in
from workflows.models import (
    Event,
)
from workflows.models.events import plain
from workflows.shapes import Json, JsonObject

_M = TypeVar("_M", bound=models.Model)
_Child = TypeVar("_Child", bound=models.Model)
_Parent = TypeVar("_Parent", bound=models.Model)

# A typed-in "example.com/hook" means https (Django 6's default, chosen now).
URL_FIELDS: Mapping[type[models.Field[Any, Any]], Mapping[str, str]] = {models.URLField: {"assume_scheme": "https"}}
SECRET_FIELDS = ("password", "secret", "token")  # never copied into the trail


def _value(instance: models.Model | None, name: str) -> Json:
    """A field's value as the trail keeps it: names rather than ids, a many-to-many as sorted names."""
    value = getattr(instance, name, None)  # a field's value, or its many-to-many manager
    if value is not None and hasattr(value, "all"):
        return [*sorted(str(v) for v in value.all())]
    kept: Json = plain(value)  # Event.record's one encoder: lazy strings, dates, times, decimals, rows
    return kept


class AuditedAdmin(admin.ModelAdmin[_M]):
    """Creations, changes and deletions made here are audit events with the actor and before/after."""

    def save_model(self, request: HttpRequest, obj: _M, form: forms.ModelForm[_M], change: bool) -> None:
        fields = [f for f in form.changed_data if not any(word in f for word in SECRET_FIELDS)]
        stored = type(obj)._default_manager.filter(pk=obj.pk).first() if change else None
        before = {f: _value(stored, f) for f in fields} if stored is not None else {}
        super().save_model(request, obj, form, change)
        request._audited = (obj, change, fields, before)  # type: ignore[attr-defined]  # per request, not self

    def save_related(
        self,
        request: HttpRequest,
        form: forms.ModelForm[_M],
        formsets: Iterable[forms.BaseFormSet[forms.BaseForm]],
        change: bool,
    ) -> None:
        super().save_related(request, form, formsets, change)  # many-to-many values (a user's groups) land here
        obj, change, fields, before = request._audited  # type: ignore[attr-defined]
        inline = _inline_changes(formsets)  # an SLA policy's escalation levels, a calendar's holidays
        if change and not fields and not inline:
            return
        extra: JsonObject = {"inlines": [*inline]} if inline else {}
        Event.record(
            obj,
            Event.Verb.ADMIN_CHANGED if change else Event.Verb.ADMIN_CREATED,
            actor=signed_in(request),
            data=_described(obj, before=before, after={f: _value(obj, f) for f in fields}, **extra),
        )

    def delete_model(self, request: HttpRequest, obj: _M) -> None:
        Event.record(obj, Event.Verb.ADMIN_DELETED, actor=signed_in(request), data=_described(obj))
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[_M]) -> None:
        for obj in queryset:
            Event.record(obj, Event.Verb.ADMIN_DELETED, actor=signed_in(request), data=_described(obj))
        super().delete_queryset(request, queryset)


def _inline_changes(formsets: Iterable[forms.BaseFormSet[forms.BaseForm]]) -> list[str]:
    """What the inline rows saved with the parent did, in words (the rows' own fields are not copied)."""
    done = []
    for formset in formsets:
        done += [f"added {o}" for o in getattr(formset, "new_objects", ())]
        done += [f"changed {o}: {', '.join(f)}" for o, f in getattr(formset, "changed_objects", ())]
        done += [f"deleted {o}" for o in getattr(formset, "deleted_objects", ())]
    return done


def _described(obj: models.Model, **changes: Json) -> JsonObject:
    return {"model": str(obj._meta.verbose_name), "object": str(obj)[:200], **changes}


def _audited(base: type[admin.ModelAdmin[_M]]) -> type[admin.ModelAdmin[_M]]:
    """A library's admin class with the trail: the same pages, every save and deletion recorded."""
    return type(f"Audited{base.__name__}", (AuditedAdmin, base), {"__module__": __name__})


class ReadOnlyInline(admin.TabularInline[_Child, _Parent]):
    """Rows the admin shows beside their parent and never adds, edits or deletes there."""

    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: _Parent | None = None) -> bool:
        return False


class ReadOnlyAdmin(AuditedAdmin[_M]):
    """Rows that change only through model transitions: visible, never edited here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: _M | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: _M | None = None) -> bool:
        return False
