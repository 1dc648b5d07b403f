"""The report: each figure beside its target, and the table of the faults injected."""

from __future__ import annotations

from collections.abc import Callable

from .common import say
from .figures import share
from .incident import incident_checks


def report(figures: dict) -> bool:
    """Print the report; True when every target is met."""

    def line(label: str, value: str, target: str, ok: bool) -> None:
        say(f"  {label:<46} {value:<28} target {target:<6} {'ok' if ok else 'MISSED'}")

    checks = {
        "launched": figures["workflows"] >= figures["workflows_requested"] and not figures["blank_states"],
        "reached": figures["reached_checkpoint"] == figures["degraded"],
        "clean": figures["resumed_clean"] == figures["resumed"],
        "owner": figures["same_owner"] == figures["resumed"],
        "decisions": figures["decisions_lost"] == 0,
        "effects": not figures["duplicate_keys"] and not figures["lost_effects"],
        "dedupe": not figures["deliveries_acted_on_twice"],
        "settled": figures["settled"],
        "restarts": not figures["kill_restart_errors"],
        "acknowledged": not figures["reports_acknowledged_not_stored"],
        "clock": not figures["stamped_ahead_of_database_clock"] and not figures["leases_longer_than_configured"],
        "memory": all(abs(row["growth_pct"]) <= 10.0 for row in figures["memory"]),
        "exits": not figures["exited_by_themselves"],
    }
    if figures["disk"]:
        disk = figures["disk"]
        checks["disk"] = (
            disk["refused"] > 0
            and disk["said"] == disk["refused"]
            and not disk["failing_at_end"]
            and disk["page_read_at_end"]
            and not disk["banner_at_end"]
        )
    if figures.get("disk_run"):
        checks["disk_run"] = figures["disk_run"]["ok"]
    incident = figures.get("incident")
    if incident:
        checks.update(incident_checks(incident))
    say("")
    say(
        f"Chaos run: seed {figures['seed']}, {figures['duration_seconds']} s, "
        f"{'settled' if figures['settled'] else 'NOT settled before the deadline'}"
    )
    say(
        f"  workflows {figures['workflows']} of {figures['workflows_requested']} "
        f"{figures['workflows_by_status']}; kills {figures['kills']}"
    )
    line("degraded workflows", f"{figures['degraded']} of {figures['workflows']}", "", True)
    line(
        "degraded that reached a checkpoint",
        f"{figures['reached_checkpoint_pct']:.1f} % ({figures['reached_checkpoint']}/{figures['degraded']})",
        "100 %",
        checks["reached"],
    )
    line("blank-state workflows", str(len(figures["blank_states"])), "0", checks["launched"])
    line(
        "resumed that completed, 0 duplicate, 0 lost",
        f"{figures['resumed_clean_pct']:.1f} % ({figures['resumed_clean']}/{figures['resumed']})",
        "100 %",
        checks["clean"],
    )
    line(
        "resumed returned to the same owner",
        f"{figures['same_owner_pct']:.1f} % ({figures['same_owner']}/{figures['resumed']})",
        "100 %",
        checks["owner"],
    )
    line("decisions lost", str(figures["decisions_lost"]), "0", checks["decisions"])
    line("duplicate effect keys (ledgers)", str(len(figures["duplicate_keys"])), "0", not figures["duplicate_keys"])
    line("lost effects (ledgers)", str(len(figures["lost_effects"])), "0", not figures["lost_effects"])
    line("deliveries an agent acted on twice", str(len(figures["deliveries_acted_on_twice"])), "0", checks["dedupe"])
    line(
        "step reports answered 2xx, then not stored",
        f"{len(figures['reports_acknowledged_not_stored'])} of {figures['reports_acknowledged']}",
        "0",
        checks["acknowledged"],
    )
    line(
        "stamps ahead of the database clock",
        str(sum(figures["stamped_ahead_of_database_clock"].values())),
        "0",
        not figures["stamped_ahead_of_database_clock"],
    )
    line(
        "delivery leases longer than configured",
        str(len(figures["leases_longer_than_configured"])),
        "0",
        not figures["leases_longer_than_configured"],
    )
    if incident:
        incident_lines(incident, checks, line)
    fault_table(figures, checks)
    line(
        "processes that exited by themselves",
        f"{len(figures['exited_by_themselves'])} (each started again)",
        "0",
        checks["exits"],
    )
    say(
        f"  workers whose consumer stalled and that left on their watchdog (console/watchdog.py), started again: "
        f"{len(figures['restarted_by_watchdog'])} {figures['restarted_by_watchdog'] or ''}"
    )
    for row in figures["memory"]:
        line(
            f"RSS of {row['process']} over {row['minutes']:g} min",
            f"{row['rss_after_warmup_mb']:g} -> {row['rss_at_end_mb']:g} MB ({row['growth_pct']:+g} %)",
            "±10 %",
            abs(row["growth_pct"]) <= 10.0,
        )
    say(
        f"  database size {figures['database_bytes'] / 2**20:.1f} MB, "
        f"{figures['database_bytes_per_workflow'] / 1024:.1f} KB per workflow"
    )
    say("  the resume dashboard's headline for this run (workflows.metrics):")
    for slug, (part, whole) in figures["headline"].items():
        say(f"    {slug.replace('_', ' '):<44} {share(part, whole):5.1f} % ({part}/{whole})")
    say(f"  duplicate-effect attempts refused by the API {figures['duplicate_effect_attempts']}")
    say(
        f"  checkpoints {figures['checkpoints']} (opened by the silence sweep: "
        f"{figures['checkpoints_opened_by_console']}) by reason {figures['checkpoints_by_reason']}"
    )
    say(f"  decisions by action/state {figures['decisions_by_action_state']}")
    say(f"  effects executed {figures['effects_executed']}; operators {figures['operator']}")
    for label, key in (
        ("blank states", "blank_states"),
        ("resumed, not clean", "resumed_not_clean"),
        ("another owner", "other_owner"),
        ("duplicated keys", "duplicate_keys"),
        ("lost effects", "lost_effects"),
        ("acted on twice", "deliveries_acted_on_twice"),
        ("acknowledged, not recorded", "decisions_unrecorded"),
        ("decisions not finished", "decisions_unfinished"),
        ("decisions awaiting approval", "decisions_awaiting_approval"),
        ("operator form errors", "operator_invalid"),
        ("restart errors", "kill_restart_errors"),
        ("step reports lost after a 2xx", "reports_acknowledged_not_stored"),
        ("stamped ahead of the database clock", "stamped_ahead_of_database_clock"),
        ("leases longer than configured", "leases_longer_than_configured"),
        ("exited by themselves, restarted", "exited_by_themselves"),
    ):
        if key == "stamped_ahead_of_database_clock" and figures["disk"].get("unsaid"):
            say(f"  full disk, not said on the queue page: {'; '.join(figures['disk']['unsaid'][:10])}")
        if figures[key]:
            listed = figures[key] if isinstance(figures[key], dict) else ", ".join(map(str, figures[key][:50]))
            say(f"  {label}: {listed}")
    ok = all(checks.values())
    say("  all targets met" if ok else "  TARGETS MISSED: " + ", ".join(k for k, v in checks.items() if not v))
    return ok


def fault_rows(figures: dict, checks: dict[str, bool]) -> list[tuple[str, str, str, bool]]:
    """(fault, what was injected, the target, held) for every fault this run injected."""
    kills, network = figures["kills"], figures["network"]
    no_loss = checks["decisions"] and checks["effects"] and checks["acknowledged"]
    rows = [
        (
            "worker SIGKILLed",
            f"{kills.get('worker', 0)}",
            "no decision lost or delivered twice",
            checks["decisions"] and checks["effects"] and checks["dedupe"],
        ),
        ("web server SIGKILLed", f"{kills.get('web', 0)}", "every 2xx kept, no decision lost", no_loss),
        (
            "agent fleet SIGKILLed mid-step",
            f"{kills.get('fleet', 0)}",
            "every run checkpointed or finished",
            checks["launched"] and checks["reached"],
        ),
    ]
    if "redis" in kills:
        rows.append(
            (
                "Redis SIGKILLed, back empty",
                f"{kills['redis']} ({figures['redis_messages_lost']} Celery messages lost with it)",
                "the outbox sends every decision again",
                checks["decisions"] and checks["settled"],
            )
        )
    if "postgres" in kills:
        rows.append(
            (
                "PostgreSQL gone (refused, sessions cut)",
                f"{kills['postgres']} ({figures['postgres_sessions_cut']} sessions cut)",
                "every 2xx kept, all recover",
                no_loss and checks["restarts"],
            )
        )
    if network:
        rows.append(
            (
                "lossy network to the agents",
                f"{network.get('connections', 0)} connections: "
                f"{network.get('dropped_mid_response', 0)} cut mid-answer, {network.get('black_holed', 0)} "
                "never answered",
                "no delivery acted on twice",
                checks["effects"] and checks["dedupe"],
            )
        )
    if figures["clock_skew_seconds"]:
        rows.append(
            (
                "worker clock ahead",
                f"+{figures['clock_skew_seconds']:g} s on worker2",
                "leases and SLA stamps on the database clock",
                checks["clock"],
            )
        )
    if figures["disk"]:  # this run is the disk-pressure run
        disk = figures["disk"]
        rows.append(
            (
                "broker disk full (filesystem transport)",
                f"{disk['fills']} fills, {disk['refused']} refused a decision, {disk['said']} said on the queue",
                "said while full, nothing lost",
                checks["disk"] and no_loss,
            )
        )
    if figures.get("disk_run"):  # the disk-pressure run that followed this one, in its own words above
        run_ = figures["disk_run"]
        disk = run_.get("disk") or {}
        rows.append(
            (
                "broker disk full (filesystem transport)",
                f"{disk.get('fills', 0)} fills, "
                f"{disk.get('refused', 0)} refused a decision, {disk.get('said', 0)} said on the queue (run "
                f"of {run_.get('workflows', 0)}, seed {run_['seed']})",
                "said while full, nothing lost",
                run_["ok"],
            )
        )
    return rows


def fault_table(figures: dict, checks: dict[str, bool]) -> None:
    say(f"  {'fault':<40} {'injected':<50} {'target':<44} held")
    for fault, injected, target, held in fault_rows(figures, checks):
        say(f"  {fault:<40} {injected:<50} {target:<44} {'yes' if held else 'NO'}")


def incident_lines(incident: dict, checks: dict[str, bool], line: Callable[[str, str, str, bool], None]) -> None:
    """The incident scenario's lines: formed, recovered by its rollout, every member delivered once, the rate."""
    rollout = incident["rollout"] or {}
    say(
        f"  incident scenario: provider outage of {incident['agent']} for {incident['outage_seconds']} s "
        f"(switch posted again after a fleet restart: {incident['switch_reasserted']}), incident "
        f"{incident['incident']} formed after {incident['formed_after_seconds']} s, "
        f"{'held' if incident['held'] else 'not held'}" + (f"; ERROR: {incident['error']}" if incident["error"] else "")
    )
    line(
        "incident formed (members, of its threshold)",
        f"{incident['members']} (threshold {incident['threshold']}, held {incident.get('held_members', 0)})",
        "formed",
        checks["incident_formed"],
    )
    line(
        "incident recovered by its rollout",
        f"{rollout.get('status', 'none')}, {len(rollout.get('waves', []))} waves, "
        f"{'resolved' if incident['resolved'] else 'unresolved'}",
        "done",
        checks["rollout_finished"],
    )
    line(
        "members delivered once, decided by the rollout",
        f"{incident['members_delivered_once']}/{incident['members']} "
        f"({len(incident['members_decided_by_others'])} by others)",
        "all",
        checks["members_once"],
    )
    line(
        "the rollout never exceeded its rate limit",
        f"at most {incident['most_in_window']} per {incident['window_seconds']:g} s (limit {incident['per_minute']})",
        "<=",
        checks["rollout_rate"],
    )
    if rollout:
        say(
            f"  rollout {rollout['id']}: waves {rollout['waves']}, {rollout['decisions']} decisions, four eyes "
            f"{'yes, approved by ' + str(rollout['approved_by']) if rollout['four_eyes'] else 'no'}, money typed "
            f"{rollout['money_total'] or 'none'}, halted {rollout['halts']} time(s) and continued "
            f"{rollout['continued']}, started at attempt {rollout['start_attempts']}; decided one by one on the "
            f"workbench: {incident['decided_one_by_one'] or 'none'}"
        )
        if rollout["halt_reasons"]:
            say(f"  rollout halts (the run's faults pausing resumed workflows again): {rollout['halt_reasons']}")
    for label, key in (
        ("members not delivered", "members_not_delivered"),
        ("members delivered twice", "members_delivered_twice"),
        ("members acted on twice", "members_acted_on_twice"),
        ("members decided by a regular operator", "members_decided_by_others"),
    ):
        if incident[key]:
            say(f"  {label}: {', '.join(map(str, incident[key][:50]))}")
