"""Internal comments: markdown rendered sanitized, @mentions notify in the console, shown in the event
log (issue 8, item 8)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.helpers import make_checkpoint, make_user
from workflows.models import Comment, Event, Notification

pytestmark = pytest.mark.django_db


def test_a_mention_notifies_the_named_operator_once_and_never_the_author(alice, bob):
    checkpoint = make_checkpoint()

    comment = Comment.post(
        checkpoint=checkpoint,
        author=alice,
        body="@bob can you check R-88? cc @alice, mail me at alice@example.com, @nobody",
    )

    assert comment.mentions == ["bob"]
    [note] = Notification.objects.all()
    assert note.recipient == bob and note.kind == Notification.Kind.MENTIONED
    assert note.path == reverse("workbench", args=[checkpoint.pk])
    assert "alice mentioned you" in note.title
    event = Event.objects.get(verb=Event.Verb.COMMENTED)
    assert event.data["comment"] == comment.pk and event.actor_user == alice


def test_markdown_is_rendered_and_scripts_are_not(client, alice, bob):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    client.post(
        reverse("comment", args=[checkpoint.pk]),
        {
            "body": "**Refund R-88** is in the ledger. <script>alert(1)</script> [x](javascript:alert(2)) "
            "<img src=x onerror=alert(3)> [ledger](https://ledger.example/R-88) @bob"
        },
    )
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()

    assert "<strong>Refund R-88</strong>" in html
    assert "<script>alert(1)" not in html and 'href="javascript' not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)" in html  # shown as text
    assert '<a href="https://ledger.example/R-88" rel="noopener noreferrer nofollow">ledger</a>' in html
    assert '<span class="mention">@bob</span>' in html


def test_an_empty_comment_is_refused(client, alice):
    checkpoint = make_checkpoint()
    client.force_login(alice)

    response = client.post(reverse("comment", args=[checkpoint.pk]), {"body": "   "}, follow=True)

    assert "Write something first." in response.content.decode()
    assert not Comment.objects.exists()


def test_a_tpm_may_comment_too(client, tess, bob):
    checkpoint = make_checkpoint()
    client.force_login(tess)

    client.post(reverse("comment", args=[checkpoint.pk]), {"body": "@bob this one breached twice this week"})

    assert Notification.objects.get().recipient == bob


def test_an_inactive_user_is_not_notified(alice):
    carol = make_user("carol")
    carol.is_active = False
    carol.save()

    Comment.post(checkpoint=make_checkpoint(), author=alice, body="@carol are you there?")

    assert not Notification.objects.exists()


def test_a_mention_inside_a_link_url_leaves_the_link_whole(client, alice, bob):
    """Issue 22, finding 11: the highlighter rewrote the sanitised HTML, breaking the href and dropping rel."""
    checkpoint = make_checkpoint()
    client.force_login(alice)

    client.post(
        reverse("comment", args=[checkpoint.pk]),
        {"body": "[profile](https://ledger.example/?owner=@bob) <https://ledger.example/?by=@bob> `@bob` @bob"},
    )
    html = client.get(reverse("workbench", args=[checkpoint.pk])).content.decode()

    assert '<a href="https://ledger.example/?owner=@bob" rel="noopener noreferrer nofollow">profile</a>' in html
    assert '<a href="https://ledger.example/?by=@bob" rel="noopener noreferrer nofollow">' in html
    assert "<code>@bob</code>" in html
    assert html.count('<span class="mention">@bob</span>') == 2  # the text mention, and the autolink's text
    assert 'href="https://ledger.example/?owner=<span' not in html
