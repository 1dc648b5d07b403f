"""What a checkpoint, a four-eyes proposal and the decision modal look like in Slack (Block Kit).

Rendered from the rows as they are when the message is sent, never from the event that caused
the send: the message is a view. Agent text is untrusted: it goes into ``plain_text`` objects,
or into ``mrkdwn`` escaped (``esc``), so it can neither ping a channel nor forge a link.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.urls import reverse

from ..models import Action, Checkpoint, Decision
from ..models.runbooks import RESUMING_ACTIONS
from ..roles import operators
from ..shapes import Json, JsonObject

# The buttons of an open checkpoint, in the order shown; failover stays in the console (it picks an agent).
DECISION_BUTTONS = (Action.RESUME, Action.RETRY_STEP, Action.HANDOFF, Action.ABORT)
CLAIM = "claim"
APPROVE, REJECT, OPEN = "approve", "reject", "open"
MODAL = "decide"  # the modal's callback id
MAX_TEXT = 2900  # Slack's limit for a section's text is 3000 characters


def esc(text: object) -> str:
    """Slack mrkdwn treats <, > and & as markup (links, mentions, @channel): escape them."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stamp(checkpoint: Checkpoint) -> str:
    """What a button on the message saw: pressed after this changed (decided, resolved, a new decision),
    the message was stale and the button fails closed. A claim does not change it: deciding still
    requires holding the checkpoint, which the domain checks."""
    decision = checkpoint.current_decision()
    phase = "open" if checkpoint.is_open else checkpoint.status
    return f"{phase}.{decision.pk if decision else 0}"


def console_url(checkpoint: Checkpoint) -> str:
    return str(settings.CONSOLE_URL).rstrip("/") + reverse("workbench", args=[checkpoint.pk])


def resume_line(checkpoint: Checkpoint) -> str:
    """The resume state in one line: what is done, what waits, what nobody knows, what was promised."""
    state = checkpoint.resume_state or {}
    parts = []
    committed = state.get("committed") or []
    if committed:
        parts.append(f"{len(committed)} committed ({', '.join(str(e.get('name')) for e in committed[:3])})")
    pending = state.get("pending")
    if isinstance(pending, dict):
        parts.append(f"pending: {pending.get('name')}")
    unknown = checkpoint.unknown_effects
    if unknown:
        parts.append(f"{len(unknown)} unknown ({', '.join(str(e.get('name')) for e in unknown[:3])}) to confirm")
    promises = state.get("promises") or []
    if promises:
        parts.append(f"{len(promises)} promise(s) made")
    return "; ".join(parts) or "nothing committed yet"


def status_line(checkpoint: Checkpoint) -> str:
    """Where the checkpoint stands, in words (who and when for anything decided)."""
    decision = checkpoint.current_decision()
    if checkpoint.status == Checkpoint.Status.OPEN:
        return "Open: nobody has claimed it."
    if checkpoint.status == Checkpoint.Status.CLAIMED:
        return f"Claimed by {esc(checkpoint.assignee.get_username() if checkpoint.assignee else '?')}."
    if decision is None:
        return f"{checkpoint.get_status_display()}."
    who = esc(decision.decided_by.get_username())
    what = f"{decision.get_action_display()} decided by {who} at {decision.decided_at:%Y-%m-%d %H:%M} UTC"
    if decision.awaits_approval:
        return f"{what}: waiting for a second operator's approval (four eyes)."
    if checkpoint.status == Checkpoint.Status.RESOLVED:
        return f"Resolved. {what}; delivered to the agent."
    if decision.is_in_delivery and decision.status in (Decision.Status.QUEUED, Decision.Status.RUNNING):
        return f"{what}; being delivered to the agent."
    return f"{what} ({decision.status})."


def checkpoint_message(checkpoint: Checkpoint) -> JsonObject:
    """The message of a checkpoint: text (for notifications) and blocks (what Slack shows)."""
    workflow = checkpoint.workflow
    title = f"{checkpoint.get_reason_display()}: {workflow.kind} {workflow.external_id}"
    breached = " (breached)" if checkpoint.is_breached else ""
    money = ", ".join(checkpoint.money_at_stake) or "none"
    fields = [
        f"*Agent*\n{esc(workflow.agent.name)}",
        f"*Ticket*\n{esc(workflow.external_id)}",
        f"*Due*\n{checkpoint.due_at:%Y-%m-%d %H:%M} UTC{breached}",
        f"*Money at stake*\n{esc(money)}",
    ]
    blocks: list[Json] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, 150)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"*{status_line(checkpoint)}*")}},
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": _clip(
                    f"*Resume state:* {esc(resume_line(checkpoint))}\n"
                    f"*Reason:* {esc(checkpoint.detail or checkpoint.reason)}"
                ),
            },
        },
        {"type": "section", "fields": [{"type": "mrkdwn", "text": _clip(f, 1900)} for f in fields]},
    ]
    if checkpoint.is_open:
        blocks.append({"type": "actions", "block_id": "checkpoint", "elements": _buttons(checkpoint)})
    else:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"<{console_url(checkpoint)}|Open in console>"}],
            }
        )
    # The text is mrkdwn too (Slack's notifications show it): the agent's words in the title are escaped there.
    return {"text": _clip(f"{esc(title)}: {status_line(checkpoint)}", 1000), "blocks": blocks}


def _buttons(checkpoint: Checkpoint) -> list[Json]:
    value = f"{checkpoint.pk}:{stamp(checkpoint)}"
    runbook = checkpoint.runbook_version
    buttons: list[Json] = []
    if checkpoint.is_unclaimed:
        buttons.append(_button("Claim", CLAIM, value, style="primary"))
    buttons += [
        _button(Action(a).label, a, value, style="danger" if a == Action.ABORT else None)
        for a in DECISION_BUTTONS
        if runbook is None or runbook.allows(a)
    ]
    buttons.append(
        {
            "type": "button",
            "action_id": OPEN,
            "text": {"type": "plain_text", "text": "Open in console"},
            "url": console_url(checkpoint),
        }
    )
    return buttons


def _button(label: str, action_id: str, value: str, *, style: str | None = None) -> JsonObject:
    button: JsonObject = {
        "type": "button",
        "action_id": action_id,
        "value": value,
        "text": {"type": "plain_text", "text": label},
    }
    if style:
        button["style"] = style
    return button


def proposal_message(decision: Decision) -> JsonObject:
    """A four-eyes proposal in the checkpoint's thread: Approve / Reject while it waits, then the answer."""
    who = esc(decision.decided_by.get_username())
    lines = [f"*{who} proposes: {decision.get_action_display()}*"]
    if decision.instructions:
        lines.append(f"Instructions: {esc(decision.instructions)}")
    for key, value in decision.confirmations.items():
        ref = decision.confirmation_refs.get(key)
        lines.append(f"Confirmed {esc(key)}: {esc(value)}" + (f" (ref {esc(ref)})" if ref else ""))
    money = ", ".join(decision.checkpoint.money_at_stake)
    if money:
        lines.append(f"Money at stake: {esc(money)}")
    if decision.awaits_approval:
        lines.append("Waiting for a second operator (not the proposer).")
    elif decision.was_rejected:
        lines.append(f"Rejected: {esc(decision.last_error)}")
    else:
        approver = esc(decision.approved_by.get_username()) if decision.approved_by else "?"
        lines.append(f"Approved by {approver}.")
    blocks: list[Json] = [{"type": "section", "text": {"type": "mrkdwn", "text": _clip("\n".join(lines))}}]
    if decision.awaits_approval:
        blocks.append(
            {
                "type": "actions",
                "block_id": "proposal",
                "elements": [
                    _button("Approve", APPROVE, str(decision.pk), style="primary"),
                    _button("Reject", REJECT, str(decision.pk), style="danger"),
                ],
            }
        )
    return {"text": _clip(lines[0].strip("*") + " — " + lines[-1], 1000), "blocks": blocks}


def money_phrase(checkpoint: Checkpoint) -> str:
    """What the operator types in the modal to confirm the money a resume can move."""
    return ", ".join(checkpoint.money_at_stake) or "moves money"


def same_phrase(typed: str, phrase: str) -> bool:
    return " ".join(typed.split()).casefold() == " ".join(phrase.split()).casefold()


def decision_modal(checkpoint: Checkpoint, action: str) -> JsonObject:
    """The modal a decision button opens: instructions, each unknown effect's confirmation, the money."""
    label = Action(action).label
    blocks: list[Json] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": _clip(
                    f"*{label}* {esc(checkpoint.workflow.kind)} {esc(checkpoint.workflow.external_id)}\n"
                    f"{esc(resume_line(checkpoint))}"
                ),
            },
        },
        _input(
            "instructions",
            "Instructions for the agent" if action != Action.ABORT else "Why abort",
            multiline=True,
            optional=True,
        ),
    ]
    if action in RESUMING_ACTIONS:
        for i, effect in enumerate(checkpoint.unknown_effects):
            name = _clip(f"Did {effect.get('name')} happen? ({effect.get('idempotency_key')})", 150)
            blocks.append(
                {
                    "type": "input",
                    "block_id": f"confirm:{i}",
                    "label": {"type": "plain_text", "text": name},
                    "element": {
                        "type": "static_select",
                        "action_id": "value",
                        "options": [_option("It happened", "happened"), _option("It did not happen", "did_not_happen")],
                    },
                }
            )
            blocks.append(_input(f"ref:{i}", "The external reference you saw (if it happened)", optional=True))
        if checkpoint.touches_money():
            reasons = "; ".join(checkpoint.money_reasons())
            blocks.append(
                {
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": _clip(f"*This decision touches money:* {esc(reasons)}")},
                }
            )
            blocks.append(_input("money", _clip(f"Type “{money_phrase(checkpoint)}” to confirm", 150)))
    if action == Action.HANDOFF:
        people: list[Json] = [_option(u.get_username(), u.get_username()) for u in operators()[:100]]
        if people:
            blocks.append(
                {
                    "type": "input",
                    "block_id": "new_owner",
                    "optional": True,
                    "label": {"type": "plain_text", "text": "New owner"},
                    "element": {"type": "static_select", "action_id": "value", "options": people},
                }
            )
        blocks.append(_input("handoff_to", "Or the human process that takes it over", optional=True))
    return {
        "type": "modal",
        "callback_id": MODAL,
        "private_metadata": json.dumps({"checkpoint": checkpoint.pk, "action": action, "stamp": stamp(checkpoint)}),
        "title": {"type": "plain_text", "text": _clip(label, 24)},
        "submit": {"type": "plain_text", "text": _clip(label, 24)},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def _input(block_id: str, label: str, *, multiline: bool = False, optional: bool = False) -> JsonObject:
    return {
        "type": "input",
        "block_id": block_id,
        "optional": optional,
        "label": {"type": "plain_text", "text": label},
        "element": {"type": "plain_text_input", "action_id": "value", "multiline": multiline},
    }


def _option(text: str, value: str) -> JsonObject:
    return {"text": {"type": "plain_text", "text": _clip(text, 75)}, "value": value[:150]}
