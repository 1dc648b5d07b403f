"""Every change made in the Django admin is an audit event, as the README promises.

The walk goes over the admin's registry (``admin.site._registry``) the way
tests/test_access_rules.py goes over the URLconf: each registered model either forbids an
operation to a superuser, or its admin records that operation through ``AuditedAdmin``'s
hooks. The named cases (an SLA target cut from 30 to 5 minutes, a user created, deactivated
or given a new password) are driven through the admin's pages with the test client.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse

from console.admin import AuditedAdmin
from tests.helpers import make_policy, make_user
from workflows.models import BreachReason, BusinessCalendar, Channel, Event, SLAPolicy

HOOKS = {
    "add": ("save_model", "save_related"),
    "change": ("save_model", "save_related"),
    "delete": ("delete_model", "delete_queryset"),
}


def _allowed(model_admin: admin.ModelAdmin[Any], operation: str, request: Any) -> bool:
    if operation == "add":
        return model_admin.has_add_permission(request)
    if operation == "change":
        return model_admin.has_change_permission(request, None)
    return model_admin.has_delete_permission(request, None)


def unaudited(site: admin.AdminSite, request: Any) -> list[str]:
    """The (model, operation) pairs a superuser may carry out in ``site`` that would write no audit event."""
    found = []
    for model, model_admin in site._registry.items():
        for operation, hooks in HOOKS.items():
            if not _allowed(model_admin, operation, request):
                continue
            for hook in hooks:
                owner = next(c for c in type(model_admin).__mro__ if hook in c.__dict__)
                # The hook is AuditedAdmin's, or an override in a subclass of it (which calls super()).
                if not (isinstance(model_admin, AuditedAdmin) and issubclass(owner, AuditedAdmin)):
                    found.append(f"{model._meta.label}: {operation} ({hook} of {owner.__name__})")
    return found


@pytest.fixture
def superuser_request(db: Any) -> Any:
    request = RequestFactory().get("/admin/")
    request.user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-" + "x" * 12)
    return request


def test_every_model_in_the_admin_audits_what_it_lets_an_admin_do(superuser_request: Any) -> None:
    assert admin.site._registry, "the walk needs the admin's registry"
    assert unaudited(admin.site, superuser_request) == []


def test_the_walk_fails_when_one_model_goes_back_to_a_plain_model_admin(superuser_request: Any) -> None:
    site = admin.AdminSite(name="probe")
    for model, model_admin in admin.site._registry.items():
        site.register(model, type(model_admin))
    site.unregister(SLAPolicy)
    site.register(SLAPolicy, admin.ModelAdmin)

    assert unaudited(site, superuser_request) == [
        "workflows.SLAPolicy: add (save_model of ModelAdmin)",
        "workflows.SLAPolicy: add (save_related of ModelAdmin)",
        "workflows.SLAPolicy: change (save_model of ModelAdmin)",
        "workflows.SLAPolicy: change (save_related of ModelAdmin)",
        "workflows.SLAPolicy: delete (delete_model of ModelAdmin)",
        "workflows.SLAPolicy: delete (delete_queryset of ModelAdmin)",
    ]


def _policy_form(policy: SLAPolicy, **changes: Any) -> dict[str, Any]:
    data = {
        "name": policy.name,
        "claim_target_minutes": policy.claim_target_minutes or "",
        "claim_warning": policy.claim_warning or "",
        "claim_warning_unit": policy.claim_warning_unit,
        "decision_target_minutes": policy.decision_target_minutes,
        "decision_warning": policy.decision_warning,
        "decision_warning_unit": policy.decision_warning_unit,
        "calendar": "",
        "watchers": "",
        "claim_reminder_minutes": policy.claim_reminder_minutes or "",
        "claim_release_minutes": policy.claim_release_minutes or "",
        "levels-TOTAL_FORMS": "0",
        "levels-INITIAL_FORMS": "0",
        "_save": "Save",
    }
    return {**data, **changes}


def test_cutting_an_sla_target_from_30_to_5_minutes_is_an_audit_event(client: Any, adam: Any) -> None:
    policy = make_policy(target=30)
    client.force_login(adam)
    url = reverse("admin:workflows_slapolicy_change", args=[policy.pk])
    prefix = client.get(url).context["inline_admin_formsets"][0].formset.prefix

    response = client.post(
        url,
        {
            **_policy_form(policy, decision_target_minutes=5, decision_warning=2),
            f"{prefix}-TOTAL_FORMS": "0",
            f"{prefix}-INITIAL_FORMS": "0",
        },
    )

    assert response.status_code == 302, response.context["errors"] if response.context else response
    event = Event.objects.get(verb=Event.Verb.ADMIN_CHANGED, subject=f"slapolicy:{policy.pk}")
    assert event.actor_user == adam
    assert event.data["before"] == {"decision_target_minutes": 30, "decision_warning": 10}
    assert event.data["after"] == {"decision_target_minutes": 5, "decision_warning": 2}


def test_adding_and_deleting_in_the_newly_audited_admins_are_events(client: Any, adam: Any) -> None:
    client.force_login(adam)

    client.post(
        reverse("admin:workflows_breachreason_add"), {"name": "Understaffed", "description": "", "is_active": "on"}
    )
    reason = BreachReason.objects.get(name="Understaffed")
    calendar = BusinessCalendar.objects.create(name="Berlin")
    channel = Channel.objects.create(kind=Channel.Kind.EMAIL, address="ops@example.com", user=adam)
    for obj, name in ((calendar, "businesscalendar"), (channel, "channel"), (reason, "breachreason")):
        client.post(reverse(f"admin:workflows_{name}_delete", args=[obj.pk]), {"post": "yes"})

    assert Event.objects.filter(verb=Event.Verb.ADMIN_CREATED, subject=f"breachreason:{reason.pk}").exists()
    deleted = set(Event.objects.filter(verb=Event.Verb.ADMIN_DELETED).values_list("subject", flat=True))
    assert deleted == {f"businesscalendar:{calendar.pk}", f"channel:{channel.pk}", f"breachreason:{reason.pk}"}


def test_changing_a_role_group_is_an_audit_event(client: Any, adam: Any) -> None:
    group = Group.objects.create(name="night-shift")
    client.force_login(adam)

    client.post(reverse("admin:auth_group_change", args=[group.pk]), {"name": "late-shift", "permissions": []})

    event = Event.objects.get(verb=Event.Verb.ADMIN_CHANGED, subject=f"group:{group.pk}")
    assert event.data["after"] == {"name": "late-shift"}


def test_creating_and_deactivating_a_user_in_the_admin_works_and_is_audited(client: Any, adam: Any) -> None:
    """Issue 22, finding 4: the user's verbose name is a lazy string, which the trail's JSON refused (500)."""
    client.force_login(adam)

    response = client.post(
        reverse("admin:auth_user_add"),
        {
            "username": "carol",
            "usable_password": "true",
            "password1": "a-long-Passphrase-9",
            "password2": "a-long-Passphrase-9",
            "_save": "Save",
        },
    )
    assert response.status_code == 302
    carol = get_user_model().objects.get(username="carol")
    change = client.get(reverse("admin:auth_user_change", args=[carol.pk]))
    assert change.status_code == 200
    response = client.post(
        reverse("admin:auth_user_change", args=[carol.pk]),
        {
            "username": "carol",
            "first_name": "",
            "last_name": "",
            "email": "",
            "groups": [],
            "user_permissions": [],
            "last_login_0": "",
            "last_login_1": "",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "09:00:00",
            "_save": "Save",
        },
    )  # is_active left unticked: deactivated

    assert response.status_code == 302
    carol.refresh_from_db()
    assert not carol.is_active
    created = Event.objects.get(verb=Event.Verb.ADMIN_CREATED, subject=f"user:{carol.pk}")
    assert created.data["model"] == "user" and created.actor_user == adam
    changed = Event.objects.get(verb=Event.Verb.ADMIN_CHANGED, subject=f"user:{carol.pk}")
    assert changed.data["before"]["is_active"] is True and changed.data["after"]["is_active"] is False


def test_an_admin_setting_someone_elses_password_is_audited_without_the_password(client: Any, adam: Any) -> None:
    """Issue 22, finding 12."""
    bob = make_user("bob")
    client.force_login(adam)

    response = client.post(
        reverse("admin:auth_user_password_change", args=[bob.pk]),
        {
            "usable_password": "true",
            "password1": "Another-long-pass-42",
            "password2": "Another-long-pass-42",
            "set-password": "Change password",
        },
    )

    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.check_password("Another-long-pass-42")
    event = Event.objects.get(verb=Event.Verb.ADMIN_CHANGED, subject=f"user:{bob.pk}")
    assert event.actor_user == adam and event.data["after"] == {"password": "(changed)"}
    assert "Another-long-pass-42" not in str(event.data) and bob.password not in str(event.data)


def test_a_refused_password_change_writes_nothing(client: Any, adam: Any) -> None:
    bob = make_user("bob")
    client.force_login(adam)

    client.post(
        reverse("admin:auth_user_password_change", args=[bob.pk]),
        {
            "usable_password": "true",
            "password1": "Another-long-pass-42",
            "password2": "different",
            "set-password": "Change password",
        },
    )

    assert not Event.objects.filter(subject=f"user:{bob.pk}", verb=Event.Verb.ADMIN_CHANGED).exists()


def test_the_trail_stores_lazy_strings_dates_decimals_and_rows_as_json(adam: Any) -> None:
    import datetime
    import decimal

    from django.utils.translation import gettext_lazy

    data: dict[Any, Any] = {
        "model": gettext_lazy("user"),
        "at": datetime.time(9, 30),
        "amount": decimal.Decimal("1.50"),
        "who": adam,
        "tags": {"b", "a"},
        gettext_lazy("key"): (1, 2),
    }
    event = Event.record(adam, Event.Verb.ADMIN_CHANGED, actor=adam, data=data)

    event.refresh_from_db()
    assert event.data == {
        "model": "user",
        "at": "09:30:00",
        "amount": "1.50",
        "who": adam.get_username(),
        "tags": ["a", "b"],
        "key": [1, 2],
    }


def test_unlocking_an_account_by_deleting_its_lockout_record_is_an_audit_event(client: Any, adam: Any) -> None:
    from axes.models import AccessAttempt  # type: ignore[import-untyped]

    attempt = AccessAttempt.objects.create(
        username="bob", ip_address="10.0.0.9", user_agent="probe", path_info="/login/", failures_since_start=30
    )
    client.force_login(adam)

    response = client.post(reverse("admin:axes_accessattempt_delete", args=[attempt.pk]), {"post": "yes"})

    assert response.status_code == 302 and not AccessAttempt.objects.exists()
    event = Event.objects.get(verb=Event.Verb.ADMIN_DELETED, subject=f"accessattempt:{attempt.pk}")
    assert event.actor_user == adam and event.data["object"].startswith("Attempted Access")
