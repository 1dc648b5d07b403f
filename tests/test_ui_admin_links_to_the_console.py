"""The admin's checkpoint and workflow pages link to the console's own pages (issue 8, defect 6)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint

pytestmark = pytest.mark.django_db


def test_the_admin_checkpoint_page_leads_to_its_workbench(client, adam):
    checkpoint = make_checkpoint()
    client.force_login(adam)

    html = client.get(reverse("admin:workflows_checkpoint_change", args=[checkpoint.pk])).content.decode()
    response = client.get(reverse("admin:view_on_site", args=[_content_type(checkpoint), checkpoint.pk]))

    assert "View on site" in html
    assert response.status_code == 302 and response["Location"].endswith(f"/checkpoints/{checkpoint.pk}/")


def test_the_admin_workflow_page_leads_to_the_workflow_page(client, adam):
    workflow = make_checkpoint().workflow
    client.force_login(adam)

    response = client.get(reverse("admin:view_on_site", args=[_content_type(workflow), workflow.pk]))

    assert response.status_code == 302 and response["Location"].endswith(f"/workflows/{workflow.pk}/")


def _content_type(obj):
    from django.contrib.contenttypes.models import ContentType

    return ContentType.objects.get_for_model(obj).pk
