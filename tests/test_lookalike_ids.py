"""Look-alike external ids: compatibility forms fold into one id, mixed scripts are marked.

Finding 10 of issue 12: an external_id with a Cyrillic "о" made a second workflow
that looked identical in the queue.
"""

from __future__ import annotations

from django.urls import reverse

from tests.apitools import api_agent, expect
from tests.helpers import make_checkpoint
from workflows.identifiers import is_mixed_script
from workflows.models import Workflow

LATIN = "order-1042"
CYRILLIC = "\u043erder-1042"  # Cyrillic small o, then Latin


def test_full_width_and_other_compatibility_forms_are_the_same_id(db):
    bot = api_agent()
    first = expect(bot.post("/workflows", {"external_id": "T-1042", "kind": "refund", "title": "t"}), 201)
    again = expect(
        bot.post("/workflows", {"external_id": "T\uff0d\uff11\uff10\uff14\uff12", "kind": "refund", "title": "t"}), 200
    )
    assert again["id"] == first["id"] and Workflow.objects.count() == 1


def test_a_mixed_script_id_is_marked_wherever_it_is_shown(client, alice):
    bot = api_agent()
    for external_id in (LATIN, CYRILLIC):
        expect(bot.post("/workflows", {"external_id": external_id, "kind": "refund", "title": "Refund"}), 201)
    lookalike, genuine = Workflow.objects.get(external_id=CYRILLIC), Workflow.objects.get(external_id=LATIN)
    assert is_mixed_script(CYRILLIC) and not is_mixed_script(LATIN)
    make_checkpoint(lookalike)
    make_checkpoint(genuine)
    client.force_login(alice)

    queue = client.get(reverse("queue")).content.decode()
    assert queue.count('data-testid="mixed-script"') == 1
    assert 'data-testid="mixed-script"' in client.get(reverse("workflow", args=[lookalike.pk])).content.decode()
    assert 'data-testid="mixed-script"' not in client.get(reverse("workflow", args=[genuine.pk])).content.decode()
    assert "Cyrillic + Latin" in queue
