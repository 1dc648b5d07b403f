"""Internal comments on a checkpoint and its workflow: markdown (rendered sanitized), @mentions that
notify the mentioned operator in the console, and an entry in the event log."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models, transaction
from django.utils import timezone

from .checkpoints import Checkpoint
from .events import Event
from .notifications import Notification
from .workflows import Workflow

if TYPE_CHECKING:
    from .base import Operator

User = settings.AUTH_USER_MODEL

# "@bob", "@anna.lee" — not the "x@y" of an email address, nor a trailing full stop.
MENTION = re.compile(r"(?<![\w@/:.])@([\w.+-]*\w)")
MAX_BODY = 5000


class Comment(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="comments")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    body = models.TextField(help_text="Markdown; rendered sanitized.")
    mentions = models.JSONField(default=list, blank=True, help_text="Usernames notified.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.author} on {self.workflow}: {self.body[:60]}"

    @staticmethod
    def mentioned(body: str, *, author: Operator) -> list[Operator]:
        """The active users named with @ in ``body``, never the author."""
        names = set(MENTION.findall(body))
        return list(
            get_user_model()
            .objects.filter(username__in=names, is_active=True)
            .exclude(pk=author.pk)
            .order_by("username")
        )

    @classmethod
    def post(cls, *, checkpoint: Checkpoint, author: Any, body: str) -> Comment:
        """Write the comment, its Event and one in-console notification per mentioned operator, together."""
        body = body.strip()[:MAX_BODY]
        if not body:
            raise ValueError("Write something first.")
        users = cls.mentioned(body, author=author)
        with transaction.atomic():
            comment = cls.objects.create(
                workflow=checkpoint.workflow,
                checkpoint=checkpoint,
                author=author,
                body=body,
                mentions=[u.get_username() for u in users],
            )
            Event.record(
                checkpoint,
                Event.Verb.COMMENTED,
                actor=author,
                data={"comment": comment.pk, "excerpt": body[:200], "mentions": comment.mentions},
            )
            if users:
                Notification.send(
                    kind=Notification.Kind.MENTIONED,
                    users=users,
                    checkpoint=checkpoint,
                    title=f"{author.get_username()} mentioned you on “{checkpoint.workflow.title}”"[:300],
                    body=body[:1000],
                    key=f"mention:{comment.pk}",
                )
        return comment
