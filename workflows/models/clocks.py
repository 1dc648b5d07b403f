"""A checkpoint's SLA clocks: warnings, breaches, the escalation chain, reminders, releases.

``SlaClock(checkpoint).record_breach(now)`` records one deadline that passed. Each record is
a conditional update that succeeds once, whatever the number of schedulers racing here
(guarantee 5), and honours the ``now`` it is given:

- it records nothing before its deadline at ``now`` (the update's condition says so, so a
  caller whose clock runs ahead cannot breach a checkpoint early);
- what happened is stamped at its deadline (a sweep that missed an hour still records the
  breach at the due time, and the escalation chain runs from there);
- what the console did about it is stamped ``now``: the notifications written and the
  first attempt of their deliveries, a reassignment's claim.

The sweep (``workflows.tasks.sweep_clocks``) passes the database's time; the checkpoint's
own transitions pass theirs (a late first claim records the claim breach, a decision past a
deadline no sweep applied yet records that breach). The checkpoint keeps its states and
transitions; this object only reads it and makes conditional updates on its row.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Count

from ..roles import operators
from .events import Event
from .notifications import Notification
from .people import can_take_work, is_working
from .sla import Firing, TeamTarget

if TYPE_CHECKING:
    from .base import Operator
    from .checkpoints import Checkpoint
    from .queue import CheckpointQuerySet


class SlaClock:
    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint

    def _rows(self) -> CheckpointQuerySet:
        # The checkpoint's own class: this module names Checkpoint for the type checker only.
        return type(self.checkpoint).objects.filter(pk=self.checkpoint.pk)

    def _holders(self) -> list[Operator]:
        assignee = self.checkpoint.assignee
        return [assignee] if assignee is not None else []

    def _watchers(self) -> tuple[list[Operator], Group | None]:
        """Who hears about a checkpoint nobody holds: the policy's watchers group and its operators
        (nobody when the policy names no group, or its group was deleted)."""
        watchers = self.checkpoint.terms.data.get("watchers")
        if watchers is None and self.checkpoint.team_id is not None:  # else the team's watchers
            watchers = (
                type(self.checkpoint)
                .objects.filter(pk=self.checkpoint.pk)
                .values_list("team__watchers", flat=True)
                .first()
            )
        group = Group.objects.filter(pk=watchers).first() if watchers is not None else None
        if group is None:
            return [], None
        return list(operators().filter(groups=group)), group

    def _tell(
        self,
        kind: str,
        title: str,
        *,
        at: datetime | None,
        now: datetime,
        key: str,
        users: Iterable[Operator | None] = (),
        group: Group | None = None,
        body: str = "",
        personal: bool = False,
    ) -> None:
        """Tell the people and group named, and (unless it is ``personal``: a reminder, "assigned to you")
        the checkpoint's team on its channels: a team hears about its checkpoints' clocks wherever it is."""
        cp = self.checkpoint
        Notification.send(
            kind=kind,
            title=f"{title}: {cp.workflow.title}",
            body=body or cp.detail[:500],
            checkpoint=cp,
            at=at,
            now=now,
            users=list(users),
            group=group,
            key=f"cp{cp.pk}:{key}",
            team=not personal,
        )

    def watchers(self) -> tuple[list[Operator], Group | None]:
        return self._watchers()

    def _tell_watchers(
        self,
        kind: str,
        title: str,
        *,
        at: datetime | None,
        now: datetime,
        key: str,
        users: Iterable[Operator | None] = (),
        body: str = "",
    ) -> None:
        """Tell ``users`` (its holders) and the watchers. A member of an unresolved incident is one of many
        with one cause: its watchers heard when the incident opened, so each kind of news reaches them once
        per incident, about the incident (the holders still hear about their own checkpoint)."""
        watchers, group = self._watchers()
        cp = self.checkpoint
        incident = cp.incident if cp.incident_id is not None else None  # the relation: incidents sit above
        if incident is None or incident.is_resolved:
            self._tell(kind, title, at=at, now=now, key=key, users=[*users, *watchers], group=group, body=body)
            return
        holders = [u for u in users if u is not None]
        if holders:
            self._tell(kind, title, at=at, now=now, key=key, users=holders, body=body)
        Notification.send(
            kind=kind,
            title=f"{title}: incident #{incident.pk}, {incident.title}",
            body=f"First of the incident's members: {cp.workflow.title}. {body}".strip(),
            path=incident.get_absolute_url(),
            at=at,
            now=now,
            users=[u for u in watchers if u not in holders],
            group=group,
            key=f"incident{incident.pk}:{kind}",
        )

    def record_claim_warning(self, now: datetime) -> bool:
        cp = self.checkpoint
        if cp.claim_warn_at is None or cp.claim_due_at is None or cp.claim_warn_at > now:
            return False  # no claim clock (its policy sets no time to claim), or not due yet
        with transaction.atomic():
            won = (
                self._rows()
                .filter(
                    status=cp.Status.OPEN,
                    first_claimed_at__isnull=True,
                    claim_warned_at__isnull=True,
                    claim_warn_at=cp.claim_warn_at,
                )
                .update(claim_warned_at=cp.claim_warn_at)
            )
            if won:
                Event.record(
                    cp,
                    Event.Verb.CLAIM_WARNING,
                    at=cp.claim_warn_at,
                    data={"claim_due_at": cp.claim_due_at.isoformat()},
                )
                self._tell_watchers(
                    Notification.Kind.CLAIM_WARNING,
                    "Nobody has claimed it yet",
                    at=cp.claim_warn_at,
                    now=now,
                    key="claim_warning",
                    body=f"Time to claim ends {cp.claim_due_at:%Y-%m-%d %H:%M} UTC.",
                )
        return bool(won)

    def record_claim_breach(self, now: datetime, *, notify: bool = True) -> bool:
        """The time-to-claim target passed unclaimed (or the first claim came late): stamped at its due time."""
        cp = self.checkpoint
        if cp.claim_due_at is None or cp.claim_due_at > now:
            return False  # no claim clock (its policy sets no time to claim), or not due yet
        with transaction.atomic():
            won = (
                self._rows()
                .filter(claim_breached_at__isnull=True, claim_due_at=cp.claim_due_at)
                .update(claim_breached_at=cp.claim_due_at)
            )
            if won:
                Event.record(
                    cp,
                    Event.Verb.CLAIM_BREACHED,
                    at=cp.claim_due_at,
                    data={"claim_due_at": cp.claim_due_at.isoformat()},
                )
                if notify:
                    self._tell_watchers(
                        Notification.Kind.CLAIM_BREACHED,
                        "Time to claim breached",
                        at=cp.claim_due_at,
                        now=now,
                        key="claim_breached",
                    )
        cp.refresh_from_db()
        return bool(won)

    def record_warning(self, now: datetime) -> bool:
        cp = self.checkpoint
        if cp.warn_at > now:
            return False  # not due yet at the caller's now
        with transaction.atomic():
            won = (
                type(cp)
                .objects.on_clock()
                .filter(pk=cp.pk, warned_at__isnull=True, warn_at=cp.warn_at)
                .update(warned_at=cp.warn_at)
            )
            if won:
                Event.record(cp, Event.Verb.SLA_WARNING, at=cp.warn_at, data={"due_at": cp.due_at.isoformat()})
                due = f"Due {cp.due_at:%Y-%m-%d %H:%M} UTC."
                if cp.assignee_id:
                    self._tell(
                        Notification.Kind.SLA_WARNING,
                        "Decision due soon",
                        at=cp.warn_at,
                        now=now,
                        key="sla_warning",
                        users=self._holders(),
                        body=due,
                    )
                else:
                    self._tell_watchers(
                        Notification.Kind.SLA_WARNING,
                        "Decision due soon",
                        at=cp.warn_at,
                        now=now,
                        key="sla_warning",
                        body=due,
                    )
        return bool(won)

    def record_breach(self, now: datetime, *, notify: bool = True) -> bool:
        """Record the SLA breach once, whatever the number of schedulers racing here.

        It is stamped with the due time it passed, not the moment a sweep noticed, and
        starts the escalation chain from there.
        """
        cp = self.checkpoint
        if cp.due_at > now:
            return False  # not due yet at the caller's now
        first = cp.terms.firing_at(cp.due_at, 0) if notify else None
        with transaction.atomic():
            # Unresolved: open, claimed, or decided (a proposal waiting for four eyes keeps the clock running).
            won = (
                type(cp)
                .objects.unresolved()
                .filter(pk=cp.pk, breached_at__isnull=True, due_at=cp.due_at)
                .update(breached_at=cp.due_at, escalation_at=first)
            )
            if won:
                chain = cp.terms.firings()
                Event.record(
                    cp,
                    Event.Verb.SLA_BREACHED,
                    at=cp.due_at,
                    data={
                        "due_at": cp.due_at.isoformat(),
                        "escalates_to": chain[0].spec["target"] if chain and notify else None,
                    },
                )
                if notify:
                    self._tell_watchers(
                        Notification.Kind.SLA_BREACHED,
                        "Decision target breached",
                        at=cp.due_at,
                        now=now,
                        key="sla_breached",
                        users=self._holders(),
                        body=f"It was due {cp.due_at:%Y-%m-%d %H:%M} UTC.",
                    )
        cp.refresh_from_db()
        return bool(won)

    def fire_escalation(self, now: datetime) -> bool:
        """Fire the next level of the escalation chain, once, at its scheduled time."""
        cp = self.checkpoint
        number, at, breached = cp.escalations_fired, cp.escalation_at, cp.breached_at
        chain = cp.terms.firings()
        if at is None or breached is None or number >= len(chain) or at > now:
            return False  # nothing scheduled (not breached, or the chain has run out), or not due yet
        firing = chain[number]
        with transaction.atomic():
            won = (
                type(cp)
                .objects.open()
                .filter(pk=cp.pk, escalations_fired=number, escalation_at=at)
                .update(escalations_fired=number + 1, escalation_at=cp.terms.firing_at(breached, number + 1))
            )
            if won:
                self._escalate(firing, at=at, now=now)
        cp.refresh_from_db()
        return bool(won)

    def _escalate(self, firing: Firing, *, at: datetime, now: datetime) -> None:
        cp = self.checkpoint
        spec = firing.spec
        base = {
            "level": firing.level + 1,
            "repeat": firing.repeat,
            "number": firing.number + 1,
            "target": spec["target"],
        }
        if spec["stop_once_claimed"] and cp.status == cp.Status.CLAIMED:
            Event.record(cp, Event.Verb.ESCALATION_SKIPPED, at=at, data={**base, "why": "claimed"})
            return
        user = get_user_model().objects.filter(pk=spec["user"]).first() if spec["user"] else None
        group = Group.objects.filter(pk=spec["group"]).first() if spec["group"] else None
        reassigned_to, why_not = None, ""
        if (team := spec.get("team")) and user is None and group is None:
            user = self._team_target(team, now)
        if spec["reassign"]:
            candidate = user if user is not None else self._least_loaded(group, now) if group is not None else None
            ok, why_not = can_take_work(candidate, now) if candidate is not None else (False, "nobody is working")
            if (
                ok
                and candidate is not None
                and candidate.pk != cp.assignee_id
                and cp.reassign_by_escalation(candidate, at=at, now=now)
            ):
                reassigned_to = candidate
        Event.record(
            cp,
            Event.Verb.ESCALATED,
            at=at,
            data={
                **base,
                "reassigned_to": reassigned_to.get_username() if reassigned_to else None,
                "not_reassigned": why_not or None,
                "notified": spec["notify"],
            },
        )
        title = f"Escalation level {firing.level + 1}"
        key = f"escalated:{firing.number}"
        if spec["notify"]:
            members = [user] if user else []
            if group is not None:
                members += list(operators().filter(groups=group))
            self._tell(
                Notification.Kind.ESCALATED,
                title,
                at=at,
                now=now,
                key=key,
                users=members,
                group=group,
                body=f"Breached at {cp.breached_at:%Y-%m-%d %H:%M} UTC; escalated to {spec['target']}.",
            )
        if reassigned_to is not None:
            self._tell(
                Notification.Kind.ASSIGNED,
                f"{title} assigned it to you",
                at=at,
                now=now,
                key=key + ":assigned",
                users=[reassigned_to],
                personal=True,
            )

    def _team_target(self, target: str, at: datetime) -> Operator | None:
        """The checkpoint's team's lead, or its least-loaded member working now (no team: nobody)."""
        team = self.checkpoint.team
        if team is None:
            return None
        return team.lead if target == TeamTarget.LEAD else team.least_loaded(at)

    def _least_loaded(self, group: Group, at: datetime) -> Operator | None:
        """The group's active operator who is working now and holds the fewest open checkpoints."""
        candidates = list(operators().filter(groups=group))
        loads = dict(
            type(self.checkpoint)
            .objects.open()
            .filter(assignee__in=candidates)
            .order_by()
            .values("assignee")
            .annotate(n=Count("pk"))
            .values_list("assignee", "n")
        )
        ranked = sorted((u for u in candidates if is_working(u, at)), key=lambda u: (loads.get(u.pk, 0), u.username))
        return ranked[0] if ranked else None

    def remind_claim(self, now: datetime) -> bool:
        """A claim with no progress: tell its holder once."""
        cp = self.checkpoint
        at, holder = cp.remind_at, cp.assignee
        if at is None or holder is None or at > now:
            return False  # no reminder due: released, or decided, since it was read, or not yet
        with transaction.atomic():
            won = (
                self._rows()
                .filter(status=cp.Status.CLAIMED, remind_at=at, assignee_id=cp.assignee_id)
                .update(remind_at=None)
            )
            if won:
                Event.record(cp, Event.Verb.CLAIM_REMINDER, at=at, data={"to": holder.get_username()})
                release = f" It goes back to the queue at {cp.release_at:%H:%M} UTC." if cp.release_at else ""
                self._tell(
                    Notification.Kind.CLAIM_REMINDER,
                    "You hold it with no progress",
                    at=at,
                    now=now,
                    key=f"reminder:{at.timestamp()}",
                    users=self._holders(),
                    body="Decide, or release it so someone else can." + release,
                    personal=True,
                )
        return bool(won)

    def release_stale_claim(self, now: datetime) -> bool:
        """A claim with no progress for the release time goes back to the queue."""
        cp = self.checkpoint
        at, holder = cp.release_at, cp.assignee
        if at is None or at > now:
            return False  # no release due: released, or decided, since it was read, or not yet
        with transaction.atomic():
            won = cp.release_for_no_progress(at=at)
            if won:
                self._tell_watchers(
                    Notification.Kind.CLAIM_RELEASED,
                    "Released to the queue after no progress",
                    at=at,
                    now=now,
                    key=f"released:{at.timestamp()}",
                    users=[holder],
                )
        return won

    def settle_late(self, now: datetime) -> None:
        """A decision past a deadline no sweep applied yet records that breach itself (at its due time)."""
        cp = self.checkpoint
        if cp.breached_at is None and cp.due_at < now:
            self.record_breach(now, notify=False)
        if cp.claim_breached_at is None and cp.claimed_late():
            self.record_claim_breach(now, notify=False)
