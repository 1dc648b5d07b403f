"""Every change of a checkpoint marks its Slack messages behind; ``send`` catches one message up.

``on_event`` runs for every audit event, in the transaction that records it: the opening of a
checkpoint creates its message row (when a workspace is connected and a channel is picked for
it), a four-eyes proposal creates its thread reply's row, and anything else about the checkpoint
(claimed, released, decided, approved, rejected, delivered, failed, breached, escalated,
resolved) bumps the rows' version. After the commit the rows are handed to the broker; the relay
(``tasks.relay_slack_messages``, in every sweep) is the safety net, as for decisions.
"""

from __future__ import annotations

import functools
import logging

from celery import shared_task
from django.db import transaction
from django.db.models.signals import post_save

from ..models import Checkpoint, Decision, Event
from ..models.events import inserted_together
from ..models.slack import SlackMessage, SlackWorkspace
from . import blocks, web

log = logging.getLogger(__name__)


# Events that change nothing a checkpoint's message shows: a delivery's lease and its retry leave the decision
# "being delivered" (blocks.status_line) and the buttons' stamp as they were. Bumping the message for them
# cost a statement on the delivery's hot path and an edit Slack would have made for nothing.
UNSHOWN = frozenset({Event.Verb.DELIVERY_STARTED, Event.Verb.DELIVERY_RETRY})


def on_event(sender: type[Event], instance: Event, created: bool, **kwargs: object) -> None:
    if not created or instance.checkpoint_id is None or instance.verb in UNSHOWN:
        return
    checkpoint_id = instance.checkpoint_id
    if instance.verb == Event.Verb.OPENED:
        if SlackWorkspace.connected() is None:
            return  # Slack is not connected: opening a checkpoint costs one indexed read, no more
        message = SlackMessage.post_for(Checkpoint.objects.get(pk=checkpoint_id))
        ids = [message.pk] if message is not None else []
    elif SlackMessage.touch(checkpoint_id):
        if instance.verb == Event.Verb.DECIDED and isinstance(instance.data, dict) and instance.data.get("four_eyes"):
            proposal = Decision.objects.filter(checkpoint_id=checkpoint_id, status=Decision.Status.PROPOSED).first()
            if proposal is not None:
                SlackMessage.post_for(proposal.checkpoint, decision=proposal)
        ids = list(SlackMessage.objects.filter(checkpoint_id=checkpoint_id).values_list("pk", flat=True))
    else:
        return
    for pk in ids:
        transaction.on_commit(functools.partial(hand_to_broker, pk))


def on_events(
    sender: type[Event], events: list[Event], slack_touched: list[int] | None = None, **kwargs: object
) -> None:
    """``on_event`` for events written together (``Event.record_many``, a rollout's wave): the checkpoints they
    change have their messages touched in one statement (or the statement that wrote them touched them:
    ``slack_touched``); an opening or a four-eyes proposal goes one by one."""
    alike: set[int] = set()
    for event in events:
        proposal = event.verb == Event.Verb.DECIDED and isinstance(event.data, dict) and event.data.get("four_eyes")
        if event.checkpoint_id is None or event.verb in UNSHOWN:
            continue
        if event.verb == Event.Verb.OPENED or proposal:
            on_event(sender, event, created=True)
        else:
            alike.add(event.checkpoint_id)
    touched = slack_touched if slack_touched is not None else SlackMessage.touch_many(alike) if alike else []
    for pk in touched:
        transaction.on_commit(functools.partial(hand_to_broker, pk))


def connect() -> None:
    post_save.connect(on_event, sender=Event, dispatch_uid="slack_outbox")
    inserted_together.connect(on_events, sender=Event, dispatch_uid="slack_outbox_together")


def hand_to_broker(message_id: int) -> None:
    """Right after the commit: send it now; a refused message is left due for the relay."""
    try:
        send_slack_message.apply_async((message_id,), retry=False)
    except Exception as exc:
        log.warning("slack message %s: broker unavailable, the relay will send it: %s", message_id, exc)


@shared_task(acks_late=True, ignore_result=True)
def send_slack_message(message_id: int) -> str:
    """A worker catches one Slack message up (``tasks.relay_slack_messages`` is its relay)."""
    return send(message_id)


def send(message_id: int) -> str:
    """Show the checkpoint as it is now: post the message (or thread reply) once, then edit it in place."""
    message = SlackMessage.objects.select_related("workspace").filter(pk=message_id).first()
    if message is None:
        return "skipped"
    version = message.start_attempt()
    if version is None:
        return "skipped"  # caught up, or another worker holds it
    checkpoint = Checkpoint.objects.select_related("workflow__agent", "assignee", "runbook_version").get(
        pk=message.checkpoint_id
    )
    thread_ts = ""
    if message.decision_id is not None:
        parent = SlackMessage.objects.filter(checkpoint=checkpoint, decision__isnull=True).first()
        if parent is None or not parent.ts:
            message.record_failure("Waiting for the checkpoint's own message to be posted.")
            return "waiting"
        thread_ts = parent.ts
        decision = Decision.objects.select_related("decided_by", "approved_by", "checkpoint").get(
            pk=message.decision_id
        )
        content = blocks.proposal_message(decision)
    else:
        content = blocks.checkpoint_message(checkpoint)
    try:  # outside any transaction: Slack may be slow or down
        if message.ts:
            answer = web.call(message.workspace, "chat.update", channel=message.channel_id, ts=message.ts, **content)
        else:
            extra = {"thread_ts": thread_ts} if thread_ts else {}
            answer = web.call(message.workspace, "chat.postMessage", channel=message.channel_id, **content, **extra)
    except web.SlackUnavailable as exc:
        message.record_failure(str(exc), retry_after=exc.retry_after)
        return "retry"
    message.record_sent(version, ts=str(answer.get("ts") or message.ts))
    return "sent"
