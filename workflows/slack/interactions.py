"""A button pressed or a modal submitted in Slack, carried out by the domain's own methods.

The request was verified before it got here (``console/views/slack.py``: Slack's signature, at
most five minutes old). Then, in order: the Slack user must be linked to an active console user
whose role may act (the console's roles, ``workflows.roles``); the button must not be stale (the
checkpoint moved on since the message was rendered: it fails closed and says who decided what,
when); and the action runs through ``Checkpoint.claim``, ``draft_decision``/``record_decision``
or ``Decision.approve``/``reject`` under ``acting_via(Via.SLACK)``: the same rules as the
workbench (unknown effects, money, four eyes, the runbook's allowed actions, who holds it).
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import TYPE_CHECKING, TypeAlias, TypedDict

from django.conf import settings
from django.core import signing
from django.urls import reverse

from workflows.models import Decider

from ..models import Action, Checkpoint, Conflict, Decision
from ..models.slack import SlackLink, SlackMessage, SlackWorkspace
from ..roles import can_act, operators
from ..shapes import Json, JsonObject
from ..via import Via, acting_via
from . import blocks, outbox, people, web

if TYPE_CHECKING:
    from ..models.base import Operator

log = logging.getLogger(__name__)
LINK_SALT = "slack-link"
Answer: TypeAlias = "JsonObject | None"  # the JSON body Slack gets back (a modal's errors), or None for an empty 200


def handle(workspace: SlackWorkspace, payload: JsonObject) -> Answer:
    kind = payload.get("type")
    if kind == "block_actions":
        return _pressed(workspace, payload)
    view = _dict(payload.get("view"))
    if kind == "view_submission" and view.get("callback_id") == blocks.MODAL:
        return _submitted(workspace, payload, view)
    return None


# --- who is pressing ---------------------------------------------------------------


def link_url(workspace: SlackWorkspace, slack_user_id: str) -> str:
    """A one-time link the person opens while signed in to the console to say "this Slack user is me"."""
    token = signing.dumps({"w": workspace.pk, "u": slack_user_id, "n": secrets.token_urlsafe(16)}, salt=LINK_SALT)
    return str(settings.CONSOLE_URL).rstrip("/") + reverse("slack_link", args=[token])


class LinkToken(TypedDict):
    """What a one-time link carries (signed by ``link_url``): the workspace, the Slack user, a nonce."""

    w: int
    u: str
    n: str


def read_link(token: str) -> LinkToken:
    """The link's contents; signing.BadSignature (or SignatureExpired) when forged or too old."""
    data = signing.loads(token, salt=LINK_SALT, max_age=settings.SLACK_LINK_MAX_AGE_SECONDS)
    if not isinstance(data, dict) or not {"w", "u", "n"} <= set(data):
        raise signing.BadSignature("Not a link token.")
    return LinkToken(w=data["w"], u=data["u"], n=data["n"])


def _slack_user(payload: JsonObject) -> str:
    user = payload.get("user")
    return str(user.get("id") or "") if isinstance(user, dict) else ""


def person(workspace: SlackWorkspace, slack_user_id: str) -> tuple[Operator | None, str]:
    """(the console user who may act, "") or (None, why not, in words for Slack). A Slack user nobody linked
    yet is linked by the address Slack verified, when that names one console user (``people``)."""
    link = SlackLink.objects.select_related("user").filter(
        workspace=workspace, slack_user_id=slack_user_id
    ).first() or people.link_by_verified_email(workspace, slack_user_id)
    if link is None:
        return None, (
            "Your Slack account is not linked to a console account, so nothing was done. "
            f"<{link_url(workspace, slack_user_id)}|Link it> while signed in to the console, then try again."
        )
    if not can_act(link.user):
        return None, (
            "Your console role is read-only (or your account is inactive): only operators and admins "
            "can claim or decide checkpoints. Nothing was done."
        )
    return link.user, ""


def _tell(workspace: SlackWorkspace, payload: JsonObject, text: str) -> None:
    """An ephemeral reply only the presser sees; a Slack failure here is logged, never raised."""
    channel = _dict(payload.get("channel"))
    try:
        web.call(
            workspace, "chat.postEphemeral", channel=str(channel.get("id") or ""), user=_slack_user(payload), text=text
        )
    except web.SlackUnavailable as exc:
        log.warning("could not tell a Slack user %r: %s", text[:100], exc)


# --- buttons -----------------------------------------------------------------------


def _pressed(workspace: SlackWorkspace, payload: JsonObject) -> Answer:
    actions = payload.get("actions")
    action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    action_id, value = str(action.get("action_id") or ""), str(action.get("value") or "")
    if action_id == blocks.OPEN or not action_id:
        return None  # a link button: Slack opens the console itself
    user, refusal = person(workspace, _slack_user(payload))
    if user is None:
        _tell(workspace, payload, refusal)
        return None
    if action_id in (blocks.APPROVE, blocks.REJECT):
        _answer_proposal(workspace, payload, user, action_id, value)
        return None
    checkpoint, seen = _checkpoint(workspace, value)
    if checkpoint is None:
        _tell(workspace, payload, "This checkpoint is not one this workspace shows. Nothing was done.")
        return None
    if seen != blocks.stamp(checkpoint):
        _stale(workspace, payload, checkpoint)
    elif action_id == blocks.CLAIM:
        with acting_via(Via.SLACK):
            if not checkpoint.claim(by=user):
                _tell(workspace, payload, f"Not claimed: {Decider(checkpoint).conflict_message()}")
    elif action_id in {a.value for a in blocks.DECISION_BUTTONS}:
        if not checkpoint.may_be_decided_by(user):
            _tell(workspace, payload, f"Nothing was done: {Decider(checkpoint).conflict_message()}")
            return None
        try:
            web.call(
                workspace,
                "views.open",
                trigger_id=str(payload.get("trigger_id") or ""),
                view=blocks.decision_modal(checkpoint, action_id),
            )
        except web.SlackUnavailable as exc:
            _tell(workspace, payload, f"Slack did not open the decision form ({exc}); decide in the console.")
    return None


def _checkpoint(workspace: SlackWorkspace, value: str) -> tuple[Checkpoint | None, str]:
    """The checkpoint a button names (one posted to this workspace), and the state its message showed."""
    pk, _, seen = value.partition(":")
    if not pk.isdigit():
        return None, ""
    checkpoint = (
        Checkpoint.objects.for_workbench().filter(pk=int(pk), slack_messages__workspace=workspace).distinct().first()
    )
    return checkpoint, seen


def _stale(workspace: SlackWorkspace, payload: JsonObject, checkpoint: Checkpoint) -> None:
    """Fail closed: do nothing, say what happened instead, and bring the message up to date."""
    _tell(
        workspace,
        payload,
        f"This message was out of date, so nothing was done. {Decider(checkpoint).conflict_message()}",
    )
    refresh(checkpoint)


def refresh(checkpoint: Checkpoint) -> None:
    SlackMessage.touch(checkpoint.pk)
    for pk in SlackMessage.objects.filter(checkpoint=checkpoint).values_list("pk", flat=True):
        outbox.hand_to_broker(pk)


def _answer_proposal(
    workspace: SlackWorkspace, payload: JsonObject, user: Operator, action_id: str, value: str
) -> None:
    decision = (
        Decision.objects.select_related("checkpoint", "decided_by")
        .filter(pk=int(value) if value.isdigit() else 0, slack_messages__workspace=workspace)
        .first()
    )
    if decision is None:
        _tell(workspace, payload, "This proposal is not one this workspace shows. Nothing was done.")
        return
    with acting_via(Via.SLACK):
        done = (
            decision.approve(by=user)
            if action_id == blocks.APPROVE
            else decision.reject(by=user, note="Rejected in Slack.")
        )
    if not done:
        _tell(workspace, payload, f"Nothing was done: {decision.refusal(by=user)}")
        refresh(decision.checkpoint)


# --- the decision modal ------------------------------------------------------------


def _submitted(workspace: SlackWorkspace, payload: JsonObject, view: JsonObject) -> Answer:
    try:
        meta = json.loads(str(view.get("private_metadata") or ""))
        pk, action, seen = int(meta["checkpoint"]), str(meta["action"]), str(meta["stamp"])
    except (ValueError, KeyError, TypeError):
        return _errors("instructions", "This form is not one the console opened.")
    user, refusal = person(workspace, _slack_user(payload))
    if user is None:
        return _errors("instructions", refusal)
    checkpoint, _ = _checkpoint(workspace, f"{pk}:")
    if checkpoint is None or action not in Action.values:
        return _errors("instructions", "This checkpoint is not one this workspace shows.")
    if seen != blocks.stamp(checkpoint):
        refresh(checkpoint)
        return _errors("instructions", f"Out of date, nothing was done: {Decider(checkpoint).conflict_message()}")
    form = _Values(view)
    unknown = checkpoint.unknown_effects
    confirmations = {e["idempotency_key"]: form.get(f"confirm:{i}") for i, e in enumerate(unknown)}
    refs = {e["idempotency_key"]: form.get(f"ref:{i}") for i, e in enumerate(unknown)}
    money_confirmed = False
    if form.has("money"):
        phrase = blocks.money_phrase(checkpoint)
        if not blocks.same_phrase(form.get("money"), phrase):
            return _errors("money", f"Type “{phrase}” exactly: it is the money this decision can move.")
        money_confirmed = True
    owner = form.get("new_owner")
    new_owner = operators().filter(username=owner).first() if owner else None
    with acting_via(Via.SLACK):
        try:
            decision = Decider(checkpoint).draft(
                action=action,
                instructions=form.get("instructions"),
                confirmations=confirmations,
                confirmation_refs=refs,
                new_owner=new_owner,
                handoff_to=form.get("handoff_to"),
                money_confirmed=money_confirmed,
            )
            Decider(checkpoint).record(decision, by=user)
        except (ValueError, Conflict) as exc:
            return _errors("instructions", str(exc))
    return {"response_action": "clear"}


def _dict(value: Json) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _errors(block_id: str, message: str) -> JsonObject:
    return {"response_action": "errors", "errors": {block_id: message[:2000]}}


class _Values:
    """The values of a submitted modal (``view.state.values``), text inputs and selects alike."""

    def __init__(self, view: JsonObject) -> None:
        self.values = _dict(_dict(view.get("state")).get("values"))

    def has(self, block_id: str) -> bool:
        return block_id in self.values

    def get(self, block_id: str) -> str:
        block = self.values.get(block_id)
        element = block.get("value") if isinstance(block, dict) else None
        if not isinstance(element, dict):
            return ""
        selected = element.get("selected_option")
        value = selected.get("value") if isinstance(selected, dict) else element.get("value")
        return str(value or "").strip()
