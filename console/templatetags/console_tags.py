"""Presentation helpers. Everything here returns plain strings: agent text
stays untrusted and the template's autoescaping does the escaping."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import nh3
from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

from workflows.identifiers import is_mixed_script, scripts
from workflows.models import (
    Action,
    Checkpoint,
    Confirmation,
    Decision,
    Delivery,
    Event,
    Reason,
    ReplayRun,
    Step,
    Workflow,
)
from workflows.models.sla import in_minutes
from workflows.money import amounts_in
from workflows.via import Via

register = template.Library()

# Comments are markdown written by people, but shown to everyone: raw HTML off in the parser, and what it
# produces cleaned by nh3 (an allow-list sanitizer) before it is marked safe. Links get rel=noopener.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable("image")
_ALLOWED_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "blockquote",
    "a",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "span",
}
_MENTION = re.compile(r"(?<![\w@/:.])@([\w.+-]*\w)")


def _highlight_mentions(state: Any) -> None:
    """A core rule: split the text tokens of each inline run at @mentions of ``env["mentions"]``.

    Only text tokens are touched, never the HTML the renderer makes from them: a mention inside a
    link's URL (an attribute) or inside code stays as written."""
    known = state.env.get("mentions") or set()
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children = []
        for token in block.children:
            if token.type != "text" or "@" not in token.content:
                children.append(token)
                continue
            at = 0
            for match in _MENTION.finditer(token.content):
                if match.group(1) not in known:
                    continue
                children.append(_text(token.content[at : match.start()]))
                mention = Token("mention", "span", 0)
                mention.content = match.group(1)
                children.append(mention)
                at = match.end()
            children.append(_text(token.content[at:]))
        block.children = children


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _render_mention(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    return format_html('<span class="mention">@{}</span>', tokens[idx].content)


_MARKDOWN.core.ruler.push("mentions", _highlight_mentions)
_MARKDOWN.add_render_rule("mention", _render_mention)


@register.filter
def markdown(text: Any, mentions: Any = ()) -> SafeString:
    """A comment as sanitized HTML, with its @mentions highlighted (in its text only)."""
    rendered = _MARKDOWN.render(str(text or ""), {"mentions": {str(m) for m in (mentions or [])}})
    html = nh3.clean(
        rendered,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href"}},
        allowed_classes={"span": {"mention"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(html)  # noqa: S308 - sanitized by nh3 just above


MAX_JSON_CHARS = 20_000
MAX_ITEM_CHARS = 200

# Enough irregular and common verbs to read an agent's step names as English.
PARTICIPLES = {
    "write": "written",
    "send": "sent",
    "pay": "paid",
    "make": "made",
    "do": "done",
    "run": "run",
    "get": "got",
    "set": "set",
    "put": "put",
    "read": "read",
    "notify": "notified",
    "reply": "replied",
    "cancel": "cancelled",
    "email": "emailed",
}


@register.filter
def pretty_json(value: Any) -> str:
    """Agent data as indented JSON, never marked safe: ``<pre>{{ x|pretty_json }}</pre>`` escapes it."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n… truncated ({len(text) - MAX_JSON_CHARS} more characters)"
    return text


@register.filter
def json_preview(value: Any, width: int = 90) -> str:
    """One line of compact JSON for a collapsed input or output; the full text is behind an expand."""
    if value is None:
        return "null"
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


@register.filter
def entries(mapping: Any) -> list[tuple[Any, ...]]:
    """``dict.items()`` that an agent cannot shadow: ``{{ d.items }}`` looks up the key "items" first."""
    return list(mapping.items()) if isinstance(mapping, dict) else []


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def short_duration(value: datetime | timedelta | None) -> str:
    """'42s', '7m', '2h 05m', '3d 4h': an age (datetime in the past) or a length."""
    if value is None:
        return ""
    delta = timezone.now() - value if isinstance(value, datetime) else value
    seconds = abs(int(delta.total_seconds()))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m" if minutes else f"{secs}s"


@register.filter
def iso(value: datetime | None) -> str:
    """``|date:'c'`` without Django's format machinery: the queue renders two per row."""
    return timezone.localtime(value).isoformat() if value else ""


# Every status, action and reason a page shows, by stored value, in words: the models' enum labels
# ("Handed Off" -> "handed off"). Values shared between enums ("failed", "queued") have the same label in each.
LABELS = {
    str(value): str(label).lower()
    for enum in (
        Workflow.Status,
        Checkpoint.Status,
        Decision.Status,
        ReplayRun.Status,
        Step.Status,
        Delivery.Status,
        Action,
        Reason,
    )
    for value, label in enum.choices
}


@register.filter
def label(value: object) -> str:
    """A status, action or reason as people read it (``handed_off`` -> "handed off"), never the stored value.
    Anything else (a workflow kind, an agent's name) is an identifier people search and filter by: as it is."""
    text = str(value or "")
    return LABELS.get(text, text)


@register.filter
def when(value: datetime | str | None) -> str:
    """A moment as the pages write one ("Dec 1 12:44:05", local time), also one stored as ISO text in JSON."""
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return text
    if not isinstance(value, datetime):
        return ""
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_current_timezone())
    return timezone.localtime(value).strftime("%b %-d %H:%M:%S")


@register.filter
def stamp(value: datetime | None) -> str:
    """``|date:'Y-m-d H:i:s'``, as cheaply."""
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S") if value else ""


@register.filter
def business_clock(checkpoint: Any) -> str:
    """Business time left (or over) and the local due time, for a checkpoint whose policy has a calendar.

    Round the clock this says nothing: the ticking countdown is already business time there.
    """
    terms = checkpoint.terms
    if terms.hours is None or not checkpoint.clock_runs:
        return ""
    now = timezone.now()
    left = terms.left(now, checkpoint.due_at)
    local = checkpoint.due_at.astimezone(terms.hours.zone)
    text = f"{short_duration(left)} business time {'left' if left.total_seconds() >= 0 else 'over'}"
    text += f" · due {local:%a %d %b %H:%M} {terms.hours.tz}"
    return text + (" · paused outside business hours" if terms.is_paused(now) else "")


@register.filter
def minutes(seconds: float | None) -> str:
    """A frozen SLA duration (seconds) as '45 min' or '2 h'."""
    return in_minutes(seconds or 0)


@register.filter
def confirmation(value: object) -> str:
    """An operator's confirmation in words ("did not happen"), from the one Confirmation enum."""
    return str(Confirmation(str(value)).label).lower() if value in Confirmation.values else str(value)


@register.filter
def countdown(due: datetime) -> str:
    """The server's first rendering of the SLA countdown; static/console.js ticks it."""
    left = due - timezone.now()
    text = short_duration(left)
    return f"{text} over" if left.total_seconds() < 0 else f"{text} left"


def _words(name: Any) -> tuple[str | None, str]:
    """'write_ticket_note' -> ('write', 'ticket note'); a single word has no verb."""
    parts = [p for p in re.split(r"[_\-\s.:/]+", str(name).strip()) if p]
    if len(parts) < 2:
        return None, " ".join(parts)
    return parts[0].lower(), " ".join(parts[1:])


def _participle(verb: str) -> str:
    if verb in PARTICIPLES:
        return PARTICIPLES[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


@register.filter
def amounts(step: Any) -> list[str]:
    """The amounts a recorded effect (in its input) or a planned step (on itself) carries, by the money rule
    (workflows.money: any key spelling, nesting or minor units), as "420.00 EUR"."""
    if not isinstance(step, dict):
        return []
    data = (
        step.get("input")
        if "input" in step
        else {k: v for k, v in step.items() if k not in ("name", "kind", "moves_money")}
    )
    return [str(a) for a in amounts_in(data)]


def _money(effect: dict[str, Any]) -> str:
    """' of 42.00 EUR' for a recorded effect (amount in its input) or a planned one (amount on the step)."""
    found = amounts(effect)
    return f" of {', '.join(found)}" if found else ""


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "…"


def _not_done(name: Any, money: str = "") -> str:
    verb, thing = _words(name)
    return f"{thing}{money} not {_participle(verb)}" if verb else f"{thing}{money} not done"


@register.simple_tag
def resume_summary(resume_state: Any) -> list[dict[str, Any]]:
    """The resume state in one line of plain language, as (kind, text) items.

    Kinds: committed, unknown, todo, promise. Built only from what the agent
    sent, so every text is escaped by the template like any other agent data.
    """
    if not isinstance(resume_state, dict):
        return []
    items: list[dict[str, Any]] = []
    done_names = set()
    for effect in _dicts(resume_state.get("committed")):
        if effect.get("kind") != "effect":
            continue
        done_names.add(str(effect.get("name")))
        verb, thing = _words(effect.get("name"))
        ref = f" {effect['external_ref']}" if effect.get("external_ref") else ""
        items.append({"kind": "committed", "text": f"{thing}{ref}{_money(effect)} committed"})
    for effect in _dicts(resume_state.get("unknown_effects")):
        done_names.add(str(effect.get("name")))
        _verb, thing = _words(effect.get("name"))
        items.append({"kind": "unknown", "text": f"{thing}{_money(effect)}: outcome unknown"})
    state = resume_state.get("state")
    remaining = state.get("remaining") if isinstance(state, dict) else None
    plan = resume_state.get("plan")
    if isinstance(plan, list):  # the agent's own account of what is left, with the money at stake
        todo = [
            (str(s.get("name")), _money(s))
            for s in _dicts(plan)
            if s.get("kind") in ("effect", "message") and str(s.get("name")) not in done_names
        ][:20]
    elif isinstance(remaining, list):
        todo = [(str(r), "") for r in remaining if isinstance(r, str | int) and str(r) not in done_names][:20]
    else:
        pending = resume_state.get("pending")
        todo = [(str(pending["name"]), "")] if isinstance(pending, dict) and pending.get("name") else []
    items += [{"kind": "todo-money" if money else "todo", "text": _not_done(name, money)} for name, money in todo]
    promises = resume_state.get("promises")
    for promise in (promises if isinstance(promises, list) else [])[:20]:
        items.append({"kind": "promise", "text": f"promised: {promise}"})
    for item in items:
        item["text"] = _clip(item["text"])
    if items:
        items[0]["text"] = items[0]["text"][:1].upper() + items[0]["text"][1:]
    return items


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)][:50] if isinstance(value, list) else []


@register.filter
def script_marker(identifier: Any) -> str:
    """A visible warning after an id that mixes scripts (a Cyrillic "о" among Latin letters looks identical)."""
    text = str(identifier or "")
    if not is_mixed_script(text):
        return ""
    names = " + ".join(sorted(s.title() for s in scripts(text)))
    return format_html(
        '<span class="badge mixed-script" data-testid="mixed-script" title="This id mixes '
        '{} letters: it may imitate another id that looks the same.">mixed scripts</span>',
        names,
    )


@register.filter
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


def _note(d: dict[str, Any]) -> str:
    return f": “{d['note']}”" if d.get("note") else ""


def _error(d: dict[str, Any]) -> str:
    return f": {d['error']}" if d.get("error") else ""


def _totals(d: dict[str, Any]) -> str:
    total = d.get("money_total")
    if not isinstance(total, dict):
        return ""
    return ", ".join(f"{amount} {currency}" for currency, amount in sorted(total.items()))


def _change(d: dict[str, Any]) -> str:
    change = f" ({label(d['from'])} → {label(d['to'])})" if "from" in d and "to" in d else ""
    return change + (f": {d['summary']}" if d.get("summary") else "")


def _step(d: dict[str, Any], what: str) -> str:
    return f"step {d.get('seq', '')} {d.get('name', '')} {what}".replace("  ", " ")


V = Event.Verb
# Every verb has its sentence: tests/test_event_text.py fails on a verb missing here.
_EVENT_TEXTS: dict[Event.Verb, Callable[[dict[str, Any]], str]] = {
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
        f"opened the checkpoint ({_reason(d.get('reason'))})" + (f": {d['detail']}" if d.get("detail") else "")
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
        "replay broke the safety rule: " + " ".join(str(v) for v in d.get("violations") or [])[:400]
    ),
    V.LOGGED_IN: lambda d: "signed in" + _from(d),
    V.LOGIN_FAILED: lambda d: f"failed to sign in as {d.get('username', '')}" + _from(d),
    V.LOCKED_OUT: lambda d: f"locked out {d.get('username', '')} after repeated failures" + _from(d),
    V.PASSWORD_CHANGED: lambda d: "changed their password" + _from(d),
    V.ADMIN_CREATED: lambda d: f"created {d.get('model', '')} {d.get('object', '')} in the admin",
    V.ADMIN_CHANGED: lambda d: (
        f"changed {d.get('model', '')} {d.get('object', '')} in the admin: "
        + ", ".join(f"{k} {d.get('before', {}).get(k)!r} → {v!r}" for k, v in (d.get("after") or {}).items())
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
        + "; ".join(f"{k} {', '.join(str(x) for x in d[k])}" for k in ("granted", "revoked") if d.get(k))
        + f" (claim {d.get('claim')}: {', '.join(str(g) for g in d.get('groups') or []) or 'none'})"
    ),
    V.SSO_LOGGED_OUT: lambda d: (
        f"signed out by the identity provider (back-channel logout): {d.get('sessions', 0)} session(s) ended"
    ),
    V.COMMENTED: lambda d: (
        f"commented: {d.get('excerpt', '')}"
        + (f" (mentions {', '.join('@' + str(m) for m in d['mentions'])})" if d.get("mentions") else "")
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
            f"took checkpoint {', '.join(str(c) for c in d['checkpoints'])} out of the incident"
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
        f"put {d.get('agent', '')}{' · ' + d['kind'] if d.get('kind') else ''} on hold"
        + (f" (new workflows: {d['new_workflows']})" if d.get("new_workflows") else "")
        + _note(d)
    ),
    V.HOLD_LIFTED: lambda d: f"lifted the hold on {d.get('agent', '')}{' · ' + d['kind'] if d.get('kind') else ''}",
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
        f"evidence{' (' + d['filename'] + ')' if d.get('filename') else ''}"
        + (f", {d['did_not_happen']} as did not happen" if d.get("did_not_happen") else "")
        + f"; {d.get('unmatched_references', 0)} references matched nothing"
    ),
    V.EFFECTS_CONFIRMED: lambda d: (
        "confirmed from evidence: "
        + ", ".join(
            f"{k} {str(v).replace('_', ' ')}"
            + (f" ({d['confirmation_refs'][k]})" if k in (d.get("confirmation_refs") or {}) else "")
            for k, v in (d.get("confirmations") or {}).items()
        )
    ),
    V.DRILL_SCHEDULED: lambda d: f"scheduled the drill for {d.get('at', '')}",
    V.DRILL_STARTED: lambda d: f"started the drill {d.get('name', '')}",
    V.DRILL_ENDED: lambda d: "ended the drill",
    V.DRILL_REFUSED: lambda d: f"could not start the drill: {d.get('refused', '')}",
    V.DRILL_ENLISTED: lambda d: f"picked for a drill ({d.get('fault', '')})",
    V.DRILL_JOURNALLED: lambda d: f"journalled its state at the drill's fault ({d.get('committed', 0)} committed)",
}


def _from(d: dict[str, Any]) -> str:
    return f" from {d['ip']}" if d.get("ip") else ""


def _clip_long(text: str) -> str:
    return text if len(text) <= 600 else text[:599] + "…"


def _reason(value: Any) -> str:
    return str(Reason(value).label).lower() if value in Reason.values else str(value)


# --- the TPM pages -------------------------------------------------------------------------------


@register.filter
def can_review(user: Any) -> bool:
    """TPMs and admins: the resume dashboard, readiness and staffing links."""
    from console.roles import can_review as allowed

    return allowed(user)


@register.filter
def is_admin(user: Any) -> bool:
    """Admins: the runbook editor and the Django admin."""
    from console.roles import is_admin as allowed

    return allowed(user)


@register.filter
def assignee_for(checkpoint: Any, user: Any) -> str:
    """Who holds a checkpoint, as the signed-in user reads it: "you" for their own, else the name."""
    if checkpoint.assignee_id is None:
        return ""
    return "you" if checkpoint.assignee_id == user.pk else str(checkpoint.assignee.get_username())


@register.filter
def split(value: str) -> list[str]:
    return str(value).split()


@register.filter
def minus(value: Any, other: Any) -> Any:
    return value - other


@register.filter
def filters_query(filters: Any) -> str:
    """A metrics.Filters as the query string of the TPM pages."""
    from urllib.parse import urlencode

    return urlencode(filters.as_query())


@register.filter
def seconds_text(value: float | None) -> str:
    return "—" if value is None else short_duration(timedelta(seconds=value))


@register.inclusion_tag("console/_drill_badge.html", takes_context=True)
def drill_badge(context: template.Context, workflow: Any, checkpoint: Any = None) -> dict[str, Any]:
    """The drill badge of a drilled workflow (issue 26): TPMs and admins always see it; operators when the
    drill is announced, or once the checkpoint (on a workflow page: any of its checkpoints) is decided."""
    if getattr(workflow, "drill_id", None) is None:
        return {"drill": None}
    drill = workflow.drill
    if checkpoint is not None:
        decided = not checkpoint.is_open
    else:
        decided = workflow.checkpoints.exclude(status__in=Checkpoint.OPEN_STATUSES).exists()
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"drill": drill if drill.shown_to(user, decided=decided) else None}


@register.simple_tag
def event_rows(events: Any, comments: Any = None, link_checkpoints: Any = False) -> SafeString:
    """The event log's rows, each rendered once per content (console/event_rows.py)."""
    from ..event_rows import render_event_rows

    return render_event_rows(events or [], comments if isinstance(comments, dict) else None, bool(link_checkpoints))
