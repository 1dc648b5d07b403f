"""The incident scenario: a provider outage hits every workflow of one agent, and a scripted incident commander
recovers the incident it forms with a rollout, under the run's usual kills and store faults.

The outage is the demo fleet's own switch (the ledgers page's "provider outage", posted with the agent's name so
that only its model calls fail). A fleet the killer restarts forgets it: the provider is still out, so the
switch is posted again until the commander ends the outage.

The commander is an operator over HTTP, through the forms a person uses: it waits for the console to group the
outage's checkpoints into an incident, takes command, holds the agent halfway through the outage (its running
workflows pause, new ones are refused), switches the outage off once it has lasted ``--outage-seconds``, lifts
the hold, starts a rollout (resume) from the incident page's form with a rate limit, typing the money at stake as
the page shows it; a second operator (the deputy) approves it when a member's runbook asks for four eyes, and
lets a halted rollout carry on (the chaos run's own faults make resumed workflows pause again, which a rollout
counts as failures). A member the rollout leaves waiting (money its confirmed total does not cover, an unknown
effect) is decided on its workbench, as the page says. When the rollout completes, the incident is resolved.

The regular operators (operators.py) leave the incident's members alone, and every checkpoint of the outage's
agent while the outage runs: those would be decided one by one before they grouped (``Outage.spares``). The
incidents the run's own faults form now and then have no commander: their members are decided one by one.
"""

from __future__ import annotations

import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .common import say
from .operators import Logbook, Operator

if TYPE_CHECKING:
    from .world import World

MONEY_FIELD = re.compile(r'name="money_total_([^"]+)"[^>]*placeholder="type ([^"]+)"')
TOAST_ERROR = re.compile(r'class="toast toast-error"[^>]*>([^<]{1,400})<')
INSTRUCTIONS = "chaos incident: the provider is back; resume each member where it stopped"


@dataclass
class Outage:
    """The outage as the run knows it: which agent, and whether it runs now (the regular operators read it)."""

    agent: str
    running: threading.Event = field(default_factory=threading.Event)
    incident: int | None = None  # the incident the outage formed, once the commander found it
    started: float = 0.0  # time.monotonic()
    ended: float = 0.0
    reasserted: int = 0  # the switch posted again after a fleet restart forgot it

    def spares(self, checkpoints: Any) -> Any:
        """What a regular operator may pick: not a member of the outage's incident, and nothing of the agent
        while it is out (its failures before they grouped). Other incidents the run's own faults form (five
        garbled answers of one tool in a quarter of an hour) have no commander: their members are decided
        one by one, as each keeps its workbench."""
        if self.incident is not None:
            checkpoints = checkpoints.exclude(incident_id=self.incident)
        if self.running.is_set():
            checkpoints = checkpoints.exclude(workflow__agent__name=self.agent)
        return checkpoints


@dataclass
class Scenario:
    """What the commander did and saw, for the figures."""

    incident: int | None = None
    rollout: int | None = None
    formed_after: float | None = None  # seconds after the outage started
    held: bool = False
    four_eyes: bool = False
    money_typed: dict[str, str] = field(default_factory=dict)
    halts: list[str] = field(default_factory=list)
    continued: int = 0
    start_attempts: int = 0
    refusals: list[str] = field(default_factory=list)
    one_by_one: list[int] = field(default_factory=list)  # members the rollout left waiting, decided on the workbench
    resolved: bool = False
    error: str = ""
    done: threading.Event = field(default_factory=threading.Event)


class Commander(Operator):
    """The incident commander: an operator who runs the incident from its page (see the module docstring)."""

    def __init__(
        self,
        world: World,
        outage: Outage,
        scenario: Scenario,
        rng: random.Random,
        record: Logbook,
        stop: threading.Event,
    ) -> None:
        users = world.incident_users
        super().__init__("commander", users["commander"], world, [], rng, record, stop)
        self.name = "incident-commander"
        self.deputy = Operator("deputy", users["deputy"], world, [], random.Random(rng.random()), record, stop)
        self.outage, self.scenario = outage, scenario
        self.args = world.args
        self.fleet_url = f"http://127.0.0.1:{world.fleet_port}"
        from demo.journal import Journal

        self.journal = Journal(world.var_dir / "demo" / "runtime.sqlite3")

    def run(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db import connection

        try:
            self.user = get_user_model().objects.get(username=self.username)
            self.deputy.user = get_user_model().objects.get(username=self.deputy.username)
            self.persist(lambda: self.browser.login(self.username, self.password), "login")
            self.deputy.persist(lambda: self.deputy.browser.login(self.deputy.username, self.deputy.password), "login")
            self.command()
        except Exception as exc:  # reported as a missed target, never swallowed
            self.scenario.error = f"{type(exc).__name__}: {exc}"
            say(f"  ! incident commander: {self.scenario.error}")
        finally:
            if self.outage.running.is_set():  # the run ends: the provider comes back whatever happened
                self.switch(on=False)
                self.outage.running.clear()
            self.scenario.done.set()
            connection.close()

    # --- the fleet's switch ------------------------------------------------------------------------
    def switch(self, *, on: bool) -> bool:
        """Post the ledgers page's outage switch for the agent; False when the fleet does not answer."""
        fields = {"outage": "1" if on else "0", "agent": self.outage.agent}
        request = urllib.request.Request(  # noqa: S310 (the fleet on loopback)
            f"{self.fleet_url}/faults/outage", data=urllib.parse.urlencode(fields).encode(), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5):  # noqa: S310
                return True
        except urllib.error.HTTPError as exc:
            return exc.code in (302, 303)
        except (urllib.error.URLError, OSError):
            return False

    def fleet_says_out(self) -> bool | None:
        """Whether the fleet's ledgers page says the outage is on (None: the fleet does not answer)."""
        try:
            with urllib.request.urlopen(f"{self.fleet_url}/ledgers", timeout=5) as response:  # noqa: S310
                page = response.read().decode(errors="replace")
        except (urllib.error.URLError, OSError):
            return None
        return "<p class=bad id=outage>" in page

    def keep_out(self) -> None:
        """The provider is still out even when the killer restarted the fleet: post the switch again."""
        if self.fleet_says_out() is False and self.switch(on=True):
            self.outage.reasserted += 1

    # --- the scenario -------------------------------------------------------------------------------
    def wait(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise RuntimeError("the run stopped before the incident was recovered")

    def command(self) -> None:
        from workflows.models import Incident

        args, scenario = self.args, self.scenario
        begin_at = max(1, args.workflows // 20)
        while self.journal.launched() < begin_at:
            self.wait(0.5)
        self.outage.running.set()  # before the switch: no regular operator picks the agent's first failures
        self.outage.started = time.monotonic()
        while not self.switch(on=True):
            self.wait(1.0)
        say(f"  incident scenario: provider outage for {self.outage.agent} (every model call fails)")
        duration = args.outage_seconds
        incident = None
        while True:
            elapsed = time.monotonic() - self.outage.started
            self.keep_out()
            if incident is None:
                # The outage's own: not an incident the run's faults formed (its timeouts say "timed out").
                incident = (
                    Incident.objects.unresolved()
                    .filter(
                        agent__name=self.outage.agent,
                        reason="model_timeout",
                        opened_by__isnull=True,
                        detail_pattern__contains="model provider unavailable",
                    )
                    .first()
                )
                if incident is not None:
                    self.outage.incident = incident.pk  # before the outage ends: the operators leave it alone
                    scenario.incident, scenario.formed_after = incident.pk, round(elapsed, 1)
                    say(f"  incident {incident.pk} formed after {elapsed:.0f}s: {incident.title}")
                    self.act(f"/incidents/{incident.pk}/commander/", {"commander": self.username}, "command")
            if incident is not None and not scenario.held and elapsed >= duration / 2:
                self.hold(incident)
            if incident is not None and elapsed >= duration:
                break
            if elapsed > 3 * duration + 120:
                raise RuntimeError(f"no incident formed in {elapsed:.0f}s of outage")
            self.wait(1.0)
        while not self.switch(on=False):  # the provider is back
            self.wait(1.0)
        self.outage.running.clear()
        self.outage.ended = time.monotonic()
        say(f"  incident scenario: the outage is over after {self.outage.ended - self.outage.started:.0f}s")
        self.lift(incident)
        self.recover(incident)

    def act(self, path: str, fields: dict, what: str, *, deputy: bool = False) -> None:
        """A form posted as a person does (again after a restart of the console); its answer is a redirect."""
        who = self.deputy if deputy else self
        answer = who.post(path, fields, what)
        self.record.count(f"incident_{what}")
        if answer is not None and answer.status not in (302, 303):
            raise RuntimeError(f"{path}: {answer.status}")

    def hold(self, incident: Any) -> None:
        from workflows.models import Hold

        self.act(
            f"/incidents/{incident.pk}/hold/",
            {"kind": "", "new_workflows": "refuse", "note": "chaos: the provider is out; stop feeding it"},
            "hold",
        )
        self.scenario.held = Hold.objects.active().filter(agent=incident.agent).exists()
        self.act(f"/incidents/{incident.pk}/status/", {"status": "mitigating"}, "status")
        say(f"  incident {incident.pk}: {self.outage.agent} on hold")

    def lift(self, incident: Any) -> None:
        from workflows.models import Hold

        for hold in Hold.objects.active().filter(agent=incident.agent):
            self.act(f"/holds/{hold.pk}/lift/", {}, "lift_hold")

    def recover(self, incident: Any) -> None:
        """Start the rollout from the incident page's form, have it approved, steer it to its end."""
        from workflows.models import Rollout

        args, scenario = self.args, self.scenario
        self.act(f"/incidents/{incident.pk}/status/", {"status": "recovering"}, "status")
        rollout = None
        while rollout is None:
            page = self.persist(lambda: self.browser.request("GET", f"/incidents/{incident.pk}/"), "incident_page")
            body = page.body if page else ""
            money = {currency: amount for currency, amount in MONEY_FIELD.findall(body)}  # the total, as read
            fields = {
                "action": "resume",
                "instructions": INSTRUCTIONS,
                "canary_percent": "5",
                "per_minute": str(args.rollout_rate),
                **{f"money_total_{currency}": amount for currency, amount in money.items()},
            }
            scenario.start_attempts += 1

            def started() -> bool:
                return Rollout.objects.filter(incident=incident).exists()

            self.post(f"/incidents/{incident.pk}/rollout/", fields, "start_rollout", done=started)
            rollout = Rollout.objects.filter(incident=incident).first()
            if rollout is None:  # refused (a member joined and the total moved): read the page again
                after = self.persist(lambda: self.browser.request("GET", f"/incidents/{incident.pk}/"), "incident")
                refusal = TOAST_ERROR.findall(after.body if after else "")
                scenario.refusals.append(refusal[0].strip() if refusal else "refused")
                if scenario.start_attempts >= 20:
                    raise RuntimeError(f"the rollout would not start: {scenario.refusals[-3:]}")
                self.wait(2.0)
        scenario.rollout, scenario.money_typed = rollout.pk, money
        scenario.four_eyes = rollout.awaits_approval
        say(
            f"  incident {incident.pk}: rollout {rollout.pk} {rollout.status} at {rollout.per_minute} per "
            f"{args.rollout_window:g}s" + (f", money typed {money}" if money else "")
        )
        if rollout.awaits_approval:
            self.act(f"/rollouts/{rollout.pk}/", {"do": "approve"}, "approve_rollout", deputy=True)
        waiting_since: dict[int, float] = {}
        looks = 0
        while True:
            rollout.refresh_from_db()
            if rollout.status == Rollout.Status.COMPLETED:
                break
            if rollout.status in (Rollout.Status.CANCELLED, Rollout.Status.REJECTED):
                raise RuntimeError(f"rollout {rollout.pk} was {rollout.status}")
            if rollout.status == Rollout.Status.PROPOSED:
                self.act(f"/rollouts/{rollout.pk}/", {"do": "approve"}, "approve_rollout", deputy=True)
            elif rollout.status == Rollout.Status.HALTED:
                # The run's own faults pause resumed workflows again: the commander reads why and goes on. Under
                # four eyes another operator than the proposer lets it go on.
                scenario.halts.append(rollout.halt_reason)
                self.act(f"/rollouts/{rollout.pk}/", {"do": "continue"}, "continue_rollout", deputy=True)
                scenario.continued += 1
            elif looks % 5 == 0:  # the waiting list drafts every member: a look every few seconds
                self.straggle(rollout, waiting_since)
            looks += 1
            self.wait(1.0)
        say(f"  incident {incident.pk}: rollout {rollout.pk} completed in {len(rollout.waves)} waves")
        self.act(f"/incidents/{incident.pk}/status/", {"status": "resolved"}, "status")
        incident.refresh_from_db()
        scenario.resolved = incident.is_resolved

    def straggle(self, rollout: Any, waiting_since: dict[int, float]) -> None:
        """A member the rollout leaves waiting for longer than a few of its windows is decided on its
        workbench, as the incident page says to (its money joined after the total was typed, say)."""
        from workflows.models import Checkpoint

        now = time.monotonic()
        waiting = {c.pk for c, _why in rollout.waiting()}
        for pk in list(waiting_since):
            if pk not in waiting:
                del waiting_since[pk]
        for pk in waiting:
            since = waiting_since.setdefault(pk, now)
            if now - since < 3 * self.args.rollout_window + 10:
                continue
            checkpoint = Checkpoint.objects.filter(pk=pk).first()
            if checkpoint is None or checkpoint.status not in ("open", "claimed"):
                continue
            if checkpoint.status == "open" and not self.claim(pk):
                continue
            checkpoint.refresh_from_db()
            if checkpoint.status == "claimed" and checkpoint.assignee_id == self.user.pk:
                self.decide(checkpoint)
                self.scenario.one_by_one.append(pk)
                del waiting_since[pk]

    def choose(self, checkpoint: Any) -> dict[str, str]:
        return {
            "action": "resume",
            "money_confirmed": "on",
            "instructions": "chaos incident: the rollout left it waiting; resumed on its workbench",
        }


def incident_users() -> dict[str, str]:
    """The commander and its deputy (the second operator under four eyes): operators of their own."""
    import secrets

    from django.contrib.auth import get_user_model

    from console.roles import set_role

    users = {}
    for name in ("commander", "deputy"):
        password = secrets.token_urlsafe(12)
        user = get_user_model().objects.create_user(name, password=password)
        set_role(user, "operator")
        users[name] = password
    return users


def most_in_any_window(times: list[Any], seconds: float) -> int:
    """The largest number of instants in any half-open window [t, t + seconds)."""
    times = sorted(times)
    most, first = 0, 0
    for last, t in enumerate(times):
        while (t - times[first]).total_seconds() >= seconds:
            first += 1
        most = max(most, last - first + 1)
    return most


def incident_figures(world: World, outage: Outage, scenario: Scenario) -> dict[str, Any]:
    """The scenario's figures, from the database and the fleet's journal."""
    from django.conf import settings

    from demo.journal import Journal
    from workflows.models import Checkpoint, Decision, Incident, Rollout

    figures: dict[str, Any] = {
        "agent": outage.agent,
        "outage_seconds": round((outage.ended or time.monotonic()) - outage.started) if outage.started else 0,
        "switch_reasserted": outage.reasserted,
        "incident": scenario.incident,
        "formed_after_seconds": scenario.formed_after,
        "held": scenario.held,
        "resolved": scenario.resolved,
        "error": scenario.error,
        "members": 0,
        "threshold": 0,
        "rollout": None,
        "window_seconds": settings.ROLLOUT_RATE_WINDOW_SECONDS,
        "most_in_window": 0,
        "per_minute": 0,
        "members_delivered_once": 0,
        "members_not_delivered": [],
        "members_delivered_twice": [],
        "members_acted_on_twice": [],
        "members_decided_by_others": [],
        "decided_one_by_one": scenario.one_by_one,
    }
    if scenario.incident is None:
        return figures
    incident = Incident.objects.select_related("agent").get(pk=scenario.incident)
    members = list(Checkpoint.objects.filter(incident=incident).values_list("pk", flat=True))
    figures.update(
        members=len(members),
        threshold=incident.agent.incident_threshold if incident.agent else 0,
        held_members=Checkpoint.objects.filter(incident=incident, reason="held").count(),
    )
    journal = Journal(world.var_dir / "demo" / "runtime.sqlite3")
    with journal.connect() as conn:
        acted = {
            str(d): int(n) for d, n in conn.execute("SELECT delivery_id, COUNT(*) FROM acted GROUP BY delivery_id")
        }
    decisions = list(Decision.objects.filter(checkpoint__incident=incident).select_related("decided_by"))
    succeeded: dict[int, list[Any]] = {}
    for d in decisions:
        if d.status == Decision.Status.SUCCEEDED:
            succeeded.setdefault(d.checkpoint_id, []).append(d)
    figures["members_delivered_once"] = sum(1 for pk in members if len(succeeded.get(pk, [])) == 1)
    figures["members_not_delivered"] = sorted(pk for pk in members if not succeeded.get(pk))
    figures["members_delivered_twice"] = sorted(pk for pk in members if len(succeeded.get(pk, [])) > 1)
    figures["members_acted_on_twice"] = sorted(
        {d.checkpoint_id for d in decisions if acted.get(str(d.delivery_id), 0) > 1}
    )
    team = {"commander", "deputy"}
    figures["members_decided_by_others"] = sorted(
        {d.checkpoint_id for d in decisions if d.decided_by.get_username() not in team}
    )
    rollout = Rollout.objects.filter(pk=scenario.rollout).first() if scenario.rollout else None
    if rollout is not None:
        # The rate limit on what the rollout decided (its instructions mark its decisions, apart from a
        # straggler's decided on its workbench): never more than per_minute in any window of the rate's length.
        own = [d.decided_at for d in decisions if d.instructions == rollout.instructions]
        figures.update(
            rollout={
                "id": rollout.pk,
                "status": rollout.status,
                "four_eyes": scenario.four_eyes,
                "approved_by": rollout.approved_by.get_username() if rollout.approved_by else None,
                "money_total": rollout.money_total,
                "waves": [len(w["checkpoints"]) for w in rollout.waves],
                "decisions": len(own),
                "halts": len(scenario.halts),
                "halt_reasons": scenario.halts[:5],
                "continued": scenario.continued,
                "start_attempts": scenario.start_attempts,
                "refusals": scenario.refusals[:5],
            },
            per_minute=rollout.per_minute,
            most_in_window=most_in_any_window(own, settings.ROLLOUT_RATE_WINDOW_SECONDS),
        )
    return figures


def incident_checks(figures: dict[str, Any]) -> dict[str, bool]:
    """The scenario's targets: formed, recovered by the rollout, every member delivered once, within the rate."""
    rollout = figures["rollout"] or {}
    return {
        "incident_formed": figures["incident"] is not None and figures["members"] >= max(1, figures["threshold"]),
        "rollout_finished": rollout.get("status") == "completed" and figures["resolved"] and not figures["error"],
        "members_once": figures["members"] > 0
        and figures["members_delivered_once"] == figures["members"]
        and not figures["members_acted_on_twice"]
        and not figures["members_decided_by_others"],
        "rollout_rate": bool(rollout) and figures["most_in_window"] <= figures["per_minute"],
    }
