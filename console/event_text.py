"""Each audit entry as a sentence, after its actor's name: the event log, the postmortem, Slack and push.

Built from what the event recorded (``Event.data``, JSON): every value is read with ``.get`` and narrowed,
so an old row missing a field still reads as a sentence, and every text is escaped by its template."""

from __future__ import annotations

from collections.abc import Callable

from workflows.models import Event
from workflows.shapes import Json, JsonObject
from workflows.via import Via

from .labels import label, reason


def event_text(event: Event) -> str:
    """One audit entry as a sentence (after its actor's name)."""
    d = event.data if isinstance(event.data, dict) else {}
    try:
        text = _EVENT_TEXTS[Event.Verb(event.verb)](d)
    except ValueError:  # a row written before its verb was named (or renamed)
        text = event.verb.replace("_", " ") + _change(d)
    if d.get("via") in Via.values and d["via"] != Via.CONSOLE:
        text += f" (via {Via(d['via']).label})"
    return _clip_long(text)


def _note(d: JsonObject) -> str:
    return f": “{d['note']}”" if d.get("note") else ""


def _error(d: JsonObject) -> str:
    return f": {d['error']}" if d.get("error") else ""


def _totals(d: JsonObject) -> str:
    total = d.get("money_total")
    if not isinstance(total, dict):
        return ""
    return ", ".join(f"{amount} {currency}" for currency, amount in sorted(total.items()))


def _change(d: JsonObject) -> str:
    change = f" ({label(d['from'])} → {label(d['to'])})" if "from" in d and "to" in d else ""
    return change + (f": {d['summary']}" if d.get("summary") else "")


def _step(d: JsonObject, what: str) -> str:
    return f"step {d.get('seq', '')} {d.get('name', '')} {what}".replace("  ", " ")


V = Event.Verb
# Every verb has its sentence: tests/test_event_text.py fails on a verb missing here.
_EVENT_TEXTS: dict[Event.Verb, Callable[[JsonObject], str]] = {
    V.CREATED: lambda d: "started the workflow",
    V.STEP_PENDING: lambda d: _step(d, "started"),
    V.STEP_COMMITTED: lambda d: _step(d, "committed"),
    V.STEP_FAILED: lambda d: _step(d, "failed"),
    V.STEP_RETRIED: lambda d: _step(d, f"retried under its key (attempt {d.get('attempt', '')})"),
    V.EFFECT_DUPLICATE_REFUSED: lambda d: (
        f"reported step {d.get('seq')} with the idempotency key of step "
        f"{d.get('recorded_seq')} ({d.get('idempotency_key')}): "
        "duplicate effect refused"
    ),
    V.FINISHED_COMPLETED: lambda d: "workflow completed" + (f": {d['summary']}" if d.get("summary") else ""),
    V.FINISHED_FAILED: lambda d: "workflow failed" + (f": {d['summary']}" if d.get("summary") else ""),
    V.OPENED: lambda d: (
        f"opened the checkpoint ({reason(d.get('reason'))})" + (f": {d['detail']}" if d.get("detail") else "")
    ),
    V.PAUSED: lambda d: "workflow paused" + _error(d),
    V.CLAIMED: lambda d: "claimed the checkpoint",
    V.RELEASED: lambda d: (
        "released the checkpoint" + (f" held by {d['from_assignee']}: {d['why']}" if d.get("why") else "")
    ),
    V.ASSIGNED: lambda d: f"assigned the checkpoint to {d.get('to')}{_note(d)}",
    V.DECIDED: lambda d: (
        f"decided: {str(d.get('action', '')).replace('_', ' ')}"
        + (" (waits for a second operator)" if d.get("four_eyes") else "")
    ),
    V.APPROVED: lambda d: "approved the decision",
    V.REJECTED: lambda d: f"rejected the decision{_note(d)}",
    V.REOPENED: lambda d: "checkpoint reopened for its proposer",
    V.RESUMING: lambda d: "started resuming the workflow",
    V.DELIVERY_STARTED: lambda d: f"delivery attempt {d.get('attempt', '')} started",
    V.DELIVERY_RETRY: lambda d: f"delivery attempt {d.get('attempt', '')} failed, retrying{_error(d)}",
    V.DELIVERY_FAILED: lambda d: f"delivery failed after {d.get('attempts', '')} attempts{_error(d)}",
    V.RETURNED_TO_QUEUE: lambda d: (
        f"checkpoint back on the queue{_error(d)}" + (f" ({d['fallback']})" if d.get("fallback") else "")
    ),
    V.DELIVERED: lambda d: "decision delivered to the agent",
    V.FETCHED_BY_AGENT: lambda d: "decision fetched by the agent",
    V.RESOLVED: lambda d: "checkpoint resolved",
    V.RESUMED: lambda d: "workflow resumed",
    V.HANDED_OFF: lambda d: f"workflow handed off to {d.get('to')}",
    V.ABORTED: lambda d: "workflow aborted",
    V.SLA_WARNING: lambda d: "SLA warning: the decision target is near",
    V.SLA_BREACHED: lambda d: (
        "SLA breached: the decision target passed"
        + (f"; escalates to {d['escalates_to']}" if d.get("escalates_to") else "")
        + (f", escalated to {d['escalated_to']}" if d.get("escalated_to") else "")
    ),
    V.REPLAY_REQUESTED: lambda d: f"asked for a replay of steps {d.get('from_seq')}..{d.get('to_seq')}",
    V.REPLAY_STARTED: lambda d: "the runtime was asked to replay the steps",
    V.REPLAY_SUCCEEDED: lambda d: (
        "replay finished: " + (f"first divergence at {d['explanation']}" if d.get("explanation") else "no drift")
    ),
    V.REPLAY_FAILED: lambda d: f"replay failed: {d.get('reason', '')}",
    V.REPLAY_CANCELLED: lambda d: "cancelled the replay",
    V.FORKED: lambda d: (
        f"forked it from step {d.get('from_seq')} as workflow {d.get('fork')}"
        + (f": {d['reason']}" if d.get("reason") else "")
    ),
    V.FORKED_FROM: lambda d: (
        f"started this workflow as a fork of workflow {d.get('original')} from step "
        f"{d.get('from_seq')}, steps before it copied as committed"
    ),
    V.FAILED_OVER: lambda d: f"failed the workflow over from {d.get('from_agent')} to the standby {d.get('to_agent')}",
    V.FAILOVER_UNDONE: lambda d: f"failover undone: the workflow is back with {d.get('to_agent')}{_error(d)}",
    V.STAND_DOWN_SENT: lambda d: f"told {d.get('agent')} to stand down ({d.get('how', 'notice delivered')})",
    V.STAND_DOWN_FAILED: lambda d: (
        f"could not tell {d.get('agent')} to stand down{_error(d)}"
        + ("; trying again later" if d.get("retrying") else "")
        + "; its API access to the workflow has ended anyway"
    ),
    V.STOOD_DOWN_REFUSED: lambda d: (
        f"refused a report after the failover to {d.get('taken_over_by')}: 409 stood_down, nothing recorded"
    ),
    V.REPLAY_SAFETY_VIOLATION: lambda d: (
        "replay broke the safety rule: " + " ".join(str(v) for v in _list(d, "violations"))[:400]
    ),
    V.LOGGED_IN: lambda d: "signed in" + _from(d),
    V.LOGIN_FAILED: lambda d: f"failed to sign in as {d.get('username', '')}" + _from(d),
    V.LOCKED_OUT: lambda d: f"locked out {d.get('username', '')} after repeated failures" + _from(d),
    V.PASSWORD_CHANGED: lambda d: "changed their password" + _from(d),
    V.ADMIN_CREATED: lambda d: f"created {d.get('model', '')} {d.get('object', '')} in the admin",
    V.ADMIN_CHANGED: lambda d: (
        f"changed {d.get('model', '')} {d.get('object', '')} in the admin: "
        + ", ".join(f"{k} {_obj(d, 'before').get(k)!r} → {v!r}" for k, v in _obj(d, "after").items())
    ),
    V.ADMIN_DELETED: lambda d: f"deleted {d.get('model', '')} {d.get('object', '')} in the admin",
    V.TOKEN_ROTATED: lambda d: f"rotated the {d.get('credential', 'credential')} of {d.get('object', '')}",
    V.CLAIM_WARNING: lambda d: "SLA warning: nobody has claimed it and the claim target is near",
    V.CLAIM_BREACHED: lambda d: "SLA breached: the time-to-claim target passed",
    V.ESCALATED: lambda d: (
        f"escalation level {d.get('level')} fired"
        + (f" (repeat {d['repeat']})" if d.get("repeat") else "")
        + (f": reassigned to {d['reassigned_to']}" if d.get("reassigned_to") else "")
        + (f": not reassigned, {d['not_reassigned']}" if d.get("not_reassigned") else "")
        + (f"; notified {d.get('target')}" if d.get("notified") else "")
    ),
    V.ESCALATION_SKIPPED: lambda d: f"escalation level {d.get('level')} skipped: someone holds the checkpoint",
    V.CLAIM_REMINDER: lambda d: f"reminded {d.get('to')}: claimed with no progress",
    V.BREACH_EXPLAINED: lambda d: (
        f"recorded the breach reason: {d.get('reason') or 'none'}" + (f" ({d['note']})" if d.get("note") else "")
    ),
    V.TEAM_TRANSFERRED: lambda d: (
        f"transferred the checkpoint from team {d.get('from') or '(none)'} to {d.get('to')}"
        + (f": {d['note']}" if d.get("note") else "")
    ),
    V.SSO_ACCESS_CHANGED: lambda d: (
        "sign-in changed access: "
        + "; ".join(f"{k} {', '.join(str(x) for x in _list(d, k))}" for k in ("granted", "revoked") if d.get(k))
        + f" (claim {d.get('claim')}: {', '.join(str(g) for g in _list(d, 'groups')) or 'none'})"
    ),
    V.SSO_LOGGED_OUT: lambda d: (
        f"signed out by the identity provider (back-channel logout): {d.get('sessions', 0)} session(s) ended"
    ),
    V.COMMENTED: lambda d: (
        f"commented: {d.get('excerpt', '')}"
        + (f" (mentions {', '.join(f'@{m}' for m in _list(d, 'mentions'))})" if d.get("mentions") else "")
    ),
    V.SLACK_LINKED: lambda d: (
        f"linked Slack user {d.get('slack_user', '')} to their account"
        + (f" by the email address Slack verified ({d.get('email', '')})" if d.get("how") == "verified_email" else "")
    ),
    V.PUSH_SUBSCRIBED: lambda d: f"turned on notifications on {d.get('device') or 'a device'}",
    V.PUSH_UNSUBSCRIBED: lambda d: (
        f"turned off notifications on {d.get('device') or 'a device'} of "
        f"{d.get('owner', '')}" + (f" ({d['why']})" if d.get("why") else "")
    ),
    V.INCIDENT_OPENED: lambda d: (
        f"opened the incident “{d.get('title', '')}”" + (" by hand" if d.get("by_hand") else "")
    ),
    V.INCIDENT_JOINED: lambda d: f"joined incident {d.get('incident', '')}",
    V.INCIDENT_REMOVED: lambda d: (
        (
            f"took checkpoint {', '.join(str(c) for c in _list(d, 'checkpoints'))} out of the incident"
            if d.get("checkpoints")
            else f"took it out of incident {d.get('incident', '')}"
        )
        + (f" (moved to incident {d['to_incident']})" if d.get("to_incident") else "")
    ),
    V.INCIDENT_MERGED: lambda d: (
        (
            f"merged this incident into incident {d['into']}"
            if d.get("into")
            else f"merged incident {d.get('from', '')} into this one"
        )
        + f" ({d.get('members', 0)} members)"
    ),
    V.INCIDENT_STATUS: lambda d: "changed the incident's status" + _change(d),
    V.INCIDENT_COMMANDER: lambda d: (
        f"made {d['to']} the incident commander" if d.get("to") else "left the incident without a commander"
    ),
    V.INCIDENT_NOTE: lambda d: f"noted: {d.get('note', '')}",
    V.HOLD_PLACED: lambda d: (
        f"put {d.get('agent', '')}{' · ' + str(d['kind']) if d.get('kind') else ''} on hold"
        + (f" (new workflows: {d['new_workflows']})" if d.get("new_workflows") else "")
        + _note(d)
    ),
    V.HOLD_LIFTED: lambda d: (
        f"lifted the hold on {d.get('agent', '')}{' · ' + str(d['kind']) if d.get('kind') else ''}"
    ),
    V.WORKFLOW_REFUSED_ON_HOLD: lambda d: f"was refused a new {d.get('kind', '')} workflow: on hold",
    V.ROLLOUT_STARTED: lambda d: (
        f"started a rollout: {d.get('action', '')} in waves, canary {d.get('canary_percent', '')} %"
    ),
    V.ROLLOUT_WAVE: lambda d: f"rollout wave {d.get('wave', '')} sent: {d.get('members', 0)} decisions",
    V.ROLLOUT_HALTED: lambda d: f"halted the rollout: {d.get('why', '')}",
    V.ROLLOUT_COMPLETED: lambda d: "completed the rollout: every member decided",
    V.ROLLOUT_CANCELLED: lambda d: "cancelled the rollout",
    V.ROLLOUT_PROPOSED: lambda d: (
        f"proposed a rollout: {d.get('action', '')} in waves, waiting for a second "
        "operator's approval" + (f" ({_totals(d)} at stake)" if d.get("money_total") else "")
    ),
    V.ROLLOUT_APPROVED: lambda d: f"approved the rollout proposed by {d.get('proposed_by', '')}",
    V.ROLLOUT_REJECTED: lambda d: f"rejected the rollout proposed by {d.get('proposed_by', '')}" + _note(d),
    V.EVIDENCE_APPLIED: lambda d: (
        f"confirmed {d.get('matched', 0)} unknown effects as happened from the provider's "
        f"evidence{' (' + str(d['filename']) + ')' if d.get('filename') else ''}"
        + (f", {d['did_not_happen']} as did not happen" if d.get("did_not_happen") else "")
        + f"; {d.get('unmatched_references', 0)} references matched nothing"
    ),
    V.EFFECTS_CONFIRMED: lambda d: (
        "confirmed from evidence: "
        + ", ".join(
            f"{k} {str(v).replace('_', ' ')}"
            + (f" ({_obj(d, 'confirmation_refs')[k]})" if k in _obj(d, "confirmation_refs") else "")
            for k, v in _obj(d, "confirmations").items()
        )
    ),
    V.DRILL_SCHEDULED: lambda d: f"scheduled the drill for {d.get('at', '')}",
    V.DRILL_STARTED: lambda d: f"started the drill {d.get('name', '')}",
    V.DRILL_ENDED: lambda d: "ended the drill",
    V.DRILL_REFUSED: lambda d: f"could not start the drill: {d.get('refused', '')}",
    V.DRILL_ENLISTED: lambda d: f"picked for a drill ({d.get('fault', '')})",
    V.DRILL_JOURNALLED: lambda d: f"journalled its state at the drill's fault ({d.get('committed', 0)} committed)",
}


def _from(d: JsonObject) -> str:
    return f" from {d['ip']}" if d.get("ip") else ""


def _list(d: JsonObject, key: str) -> list[Json]:
    """The list an event recorded under ``key``; none when a row holds something else there."""
    value = d.get(key)
    return value if isinstance(value, list) else []


def _obj(d: JsonObject, key: str) -> JsonObject:
    """The object an event recorded under ``key``; an empty one when a row holds something else there."""
    value = d.get(key)
    return value if isinstance(value, dict) else {}


def _clip_long(text: str) -> str:
    return text if len(text) <= 600 else text[:599] + "…"
