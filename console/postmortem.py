"""An incident's postmortem draft, in Markdown: summary, timeline, blast radius, decisions and rollout waves,
outcomes, SLA breaches, the times to detect, hold and recover, and an empty action-items section.

It computes no figure of its own: the blast radius and the timeline are ``workflows.blast_radius``'s, the
times ``workflows.incident_figures``'s, the four outcome shares ``workflows.metrics``'s (over the members'
workflows), and each trail entry's sentence ``console.event_text``'s.

Agent-supplied text (titles, details, promises, notes, ticket ids, agent names: anything not written here)
goes through ``md``: every punctuation character that can open Markdown or HTML mid-line is backslash-escaped
and every run of whitespace, line breaks included, becomes one space, so no heading, list, link, image, table
cell, emphasis or HTML can start inside it; it renders as the text it is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime

from django.utils import timezone

from workflows import blast_radius, incident_figures
from workflows.metrics import shares_over
from workflows.models import Checkpoint, Decision, Event, Incident, Workflow

from .event_text import event_text

TIMELINE_MAX = 500
BREACHES_LISTED = 50
# What can open Markdown or HTML mid-line: emphasis, code, links and images, autolinks (":" and "." break a
# URL or a domain apart), HTML and entities, table cells, strikethrough. Line starts are always this module's.
_PUNCTUATION = re.compile(r"([\\`*_\[\]()<>!|~&#:.])")
_SPACE = re.compile(r"\s+")


def md(value: object, *, limit: int = 500) -> str:
    """``value`` as inert Markdown text: one line, punctuation escaped, clipped to ``limit`` characters."""
    text = _SPACE.sub(" ", str(value)).strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _PUNCTUATION.sub(r"\\\1", text)


def _stamp(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if at else "—"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _entry(entry: Mapping[str, object]) -> str:
    if isinstance(event := entry.get("event"), Event):
        return md(event_text(event))
    if isinstance(decision := entry.get("decision"), Decision):
        return (
            f"decided {md(decision.get_action_display().lower())} on checkpoint {decision.checkpoint_id} "
            f"({md(decision.checkpoint.workflow.external_id, limit=100)}): {md(decision.status)}"
        )
    arrival = entry.get("arrival")
    if isinstance(arrival, Checkpoint):
        return (
            f"{entry['which']} member arrived: checkpoint {arrival.pk} "
            f"({md(arrival.workflow.external_id, limit=100)}), {md(arrival.get_reason_display())}"
        )
    return ""


def draft(incident: Incident, *, now: datetime | None = None) -> str:
    """The postmortem draft of ``incident`` as Markdown text."""
    now = now or timezone.now()
    radius = blast_radius.for_incident(incident, now=now)
    times = incident_figures.Times.of(incident)
    lines = [
        f"# Postmortem draft: incident {incident.pk}",
        "",
        f"*Exported from Recovery Console on {_stamp(now)} UTC. A draft: edit it, then file it.*",
        "",
    ]
    lines += _summary(incident, radius, times)
    lines += _timings(times)
    lines += _timeline(incident)
    lines += _radius(radius)
    lines += _decisions(incident)
    lines += _outcomes(incident)
    lines += _breaches(incident)
    lines += ["## Action items", "", "| Action | Owner | Due |", "| --- | --- | --- |", ""]
    return "\n".join(lines)


def _summary(incident: Incident, radius: blast_radius.BlastRadius, times: incident_figures.Times) -> list[str]:
    signature = (
        " · ".join(
            md(part, limit=200)
            for part in (
                incident.agent.name if incident.agent else "",
                incident.kind,
                incident.reason,
                incident.step_name,
            )
            if part
        )
        if incident.signature
        else "opened by hand from a selection"
    )
    lines = [
        "## Summary",
        "",
        f"- **Title:** {md(incident.title, limit=300)}",
        f"- **Status:** {md(incident.get_status_display())}"
        + (f" (merged into incident {incident.merged_into_id})" if incident.merged_into_id else ""),
        f"- **Commander:** {md(incident.commander.get_username()) if incident.commander else 'nobody'}",
        f"- **Signature:** {signature}",
    ]
    if incident.detail_pattern:
        lines.append(f"- **Detail pattern:** {md(incident.detail_pattern, limit=300)}")
    lines += [
        f"- **Started** (first member): {_stamp(times.started_at)} UTC; **opened**: "
        f"{_stamp(incident.opened_at)} UTC; **resolved**: {_stamp(incident.resolved_at)}"
        + (" UTC" if incident.resolved_at else ""),
        f"- **Members:** {radius.members} checkpoints of {radius.workflows} workflows, {radius.tickets} tickets"
        + (f", {radius.customers} customers" if radius.customers else "")
        + f"; {radius.open_members} still waiting for a decision",
        "- **Runbooks matched:** " + (", ".join(md(r.title, limit=200) for r in radius.runbooks) or "none"),
        "",
    ]
    return lines


def _timings(times: incident_figures.Times) -> list[str]:
    return [
        "## Time to detect, hold and recover",
        "",
        "Measured from the first member's arrival (`workflows/incident_figures.py`).",
        "",
        "| Time to detect | Time to hold | Time to recover |",
        "| --- | --- | --- |",
        f"| {_duration(times.to_detect)} | {_duration(times.to_hold) if times.held_at else 'never held'} | "
        f"{_duration(times.to_recover) if times.recovered_at else 'not recovered yet'} |",
        "",
    ]


def _timeline(incident: Incident) -> list[str]:
    entries = blast_radius.timeline(incident, limit=TIMELINE_MAX)
    lines = ["## Timeline (UTC)", ""]
    if len(entries) >= TIMELINE_MAX:
        lines += [f"The latest {TIMELINE_MAX} entries; the incident page keeps the rest.", ""]
    for entry in entries:
        actor = str(entry["actor"])
        lines.append(
            f"- {_stamp(entry['at'])}" + (f" · {md(actor, limit=100)}" if actor else "") + f" · {_entry(entry)}"
        )
    return [*lines, ""] if entries else [*lines, "Nothing recorded.", ""]


def _radius(radius: blast_radius.BlastRadius) -> list[str]:
    lines = [
        "## Blast radius",
        "",
        f"- **Workflows:** {radius.workflows} ({radius.open_members} waiting for a decision)",
        f"- **Tickets:** {radius.tickets}" + (f", {radius.customers} customers" if radius.customers else ""),
        f"- **Unknown effects:** {radius.unknown_effects} in {radius.members_with_unknown_effects} workflows",
        f"- **SLA now:** {radius.breached} breached, {radius.breaching_15} breaching within 15 min, "
        f"{radius.breaching_60} within 60 min",
        "",
        "### Money at stake",
        "",
    ]
    rows = radius.money.rows()
    if rows:
        lines += [
            "| Currency | Committed (done) | Pending (unknown or in flight) | Planned |",
            "| --- | --- | --- | --- |",
        ]
        lines += [
            f"| {md(r['currency'], limit=10)} | {r['committed'] if r['committed'] is not None else '—'} | "
            f"{r['pending'] if r['pending'] is not None else '—'} | "
            f"{r['planned'] if r['planned'] is not None else '—'} |"
            for r in rows
        ]
    else:
        lines.append("No amount in the members' resume states.")
    lines += [f"- {n} {stage} amounts could not be read." for stage, n in radius.money.unreadable_by_stage]
    lines += ["", "### Promises made to users", ""]
    lines += [
        f"- {md(p['text'], limit=300)} × {p['count']}" + (f", first due {_stamp(p['due'])} UTC" if p["due"] else "")
        for p in radius.promises
    ] or ["None."]
    return [*lines, ""]


def _decisions(incident: Incident) -> list[str]:
    lines = ["## Decisions and rollout waves", ""]
    counts = Counter(Decision.objects.filter(checkpoint__incident=incident).values_list("action", "status"))
    if counts:
        lines += ["| Decision | Status | Members |", "| --- | --- | --- |"]
        lines += [f"| {md(action)} | {md(status)} | {n} |" for (action, status), n in sorted(counts.items())]
    else:
        lines.append("No decision on its members yet.")
    lines.append("")
    for rollout in incident.rollouts.select_related("started_by").order_by("started_at", "pk"):
        lines += [
            f"### Rollout {rollout.pk}: {md(rollout.get_action_display().lower())}, "
            f"{md(rollout.get_status_display().lower())}",
            "",
            f"Started {_stamp(rollout.started_at)} UTC by {md(rollout.started_by.get_username())}; canary "
            f"{rollout.canary_percent} %, at most {rollout.per_minute} decisions a minute, halts past "
            f"{rollout.halt_share:.0%} failed in a wave.",
        ]
        if rollout.halt_reason:
            lines.append(f"Halted: {md(rollout.halt_reason)}")
        lines += ["", "| Wave | Sent (UTC) | Decisions | Failed | Settled |", "| --- | --- | --- | --- | --- |"]
        for wave in rollout.waves:
            outcome = rollout.outcome(wave)
            lines.append(
                f"| {wave['number']} | {_stamp(datetime.fromisoformat(wave['at']))} | {outcome.size} | "
                f"{outcome.failed} | {outcome.settled} |"
            )
        lines.append("")
    return lines


def _outcomes(incident: Incident) -> list[str]:
    workflows = Workflow.objects.filter(pk__in=incident.members.values("workflow_id"))
    lines = [
        "## Outcomes",
        "",
        "The resume dashboard's four shares over the members' workflows (settled ones, as the dashboard counts them).",
        "",
        "| Figure | Share | Of | Definition |",
        "| --- | --- | --- | --- |",
    ]
    for share in shares_over(workflows).values():
        value = f"{share.percent:.0f} %" if share.percent is not None else "—"
        lines.append(f"| {md(share.label)} | {value} | {share.part} of {share.whole} | {md(share.definition)} |")
    return [*lines, ""]


def _breaches(incident: Incident) -> list[str]:
    breached = incident.members.filter(breached_at__isnull=False).select_related("workflow").order_by("breached_at")
    total = breached.count()
    lines = [
        "## SLA breaches",
        "",
        f"{total} of its members breached their SLA." if total else "No member breached its SLA.",
        "",
    ]
    if total:
        lines += ["| Checkpoint | Ticket | Due (UTC) | Breached (UTC) |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {c.pk} | {md(c.workflow.external_id, limit=100)} | {_stamp(c.due_at)} | {_stamp(c.breached_at)} |"
            for c in breached[:BREACHES_LISTED]
        ]
        if total > BREACHES_LISTED:
            lines.append(f"\nThe first {BREACHES_LISTED} of {total}.")
        lines.append("")
    return lines
