"""The demo fleet under chaos: faults at every step, processes killed at random, operators working the queue.

    make chaos                                        # 1,000 workflows
    make chaos CHAOS_ARGS="--workflows 200 --seed 7"  # or: .venv/bin/python -m scripts.chaos --help

What runs: a fresh PostgreSQL database (``DATABASE_URL``, default
``postgres://postgres@127.0.0.1:5432/recovery_chaos``, dropped and created
again, so its name must contain "chaos"), a flushed Redis database
(``CELERY_BROKER_URL``, default ``redis://127.0.0.1:6379/7``: FLUSHDB, so never
point it at a broker in use), a fresh VAR_DIR, ``migrate`` and ``seed_demo``;
then real processes: gunicorn (2 workers), two Celery workers (prefork), beat,
the outbox relay and the demo fleet (``run_demo_fleet --total N``: simulated
agents doing the worked example through the real HTTP API, with faults
injected at every step boundary: model timeouts, garbage tool output, rate
limits, effects whose outcome is unknown because the call timed out before or
after it committed). A killer SIGKILLs, at random intervals and in shuffled
rounds, a Celery worker, the web server or the fleet itself (the agent process
killed mid-step), each with its whole process group, and starts it again.
Scripted operators log in over HTTP and work the queue through the same forms
a person uses: claim, confirm every unknown effect from what the simulated
systems really recorded (the ledgers: executed -> "happened" with its
reference, not executed -> "did not happen"), then mostly resume, sometimes
retry the step or hand off to another operator, rarely abort; a second
operator approves four-eyes proposals from the queue's Awaiting approval tab (the money
runbooks require them here; the tab never lists an operator's own proposals).
The hard profile (``--hard``; each fault also has a flag of its own) takes down
what sits under the stack too, in the same shuffled kill rounds: a private
Redis (broker and cache) SIGKILLed and started again empty, so queued Celery
messages vanish and the outbox must send them again; the run's PostgreSQL
database refusing new sessions with every open one cut, as in a restart (only
that database: ``ALLOW_CONNECTIONS`` and ``pg_terminate_backend``, never the
shared cluster); deliveries crossing a seeded slow and lossy proxy
(``demo.netfaults``) that delays every connection and cuts answers
mid-response or never answers, after the agent acted; and the second worker's
clock five minutes ahead (``scripts/skewed_clock.py``); then a second, shorter run on
the embedded default's broker (kombu's filesystem transport, its folder a small
tmpfs, so root) whose folder is filled to the last byte in the kill rounds and
given room again (``--disk-pressure``). Its extra targets: every
step report the console answered 2xx is still stored (the fleet journals each
acknowledgement), no record is stamped ahead of the database's clock, and no
delivery lease is longer than configured; while the broker's disk is full and a
decision is refused, the queue page says so (with how many decisions wait) and
says nothing once there is room again; a table names each fault, how often it
was injected, its target and whether it held.
The incident scenario (on unless ``--no-incident``; ``incident.py``): a
provider outage of one agent (``--outage-agent``, ``--outage-seconds``) through
the fleet's own switch; the regular operators leave its incident's members,
and the agent's checkpoints while the outage runs, to a scripted incident
commander, who takes the incident the console forms, holds the agent, ends
the outage, lifts the hold and recovers it with a rollout from the incident
page's form at ``--rollout-rate`` decisions per ``--rollout-window`` seconds
(its money typed, approved by a deputy under four eyes, continued when the
run's faults halt it), then resolves it.
When the fleet has launched N workflows the killer stops and the run drains:
until every workflow is terminal, bounded by ``--timeout``. Then it prints
the report and exits 1 when a target is missed.

The figures are the resume dashboard's, from ``workflows.metrics`` (its
docstring and the README define each one) over the whole run as one period;
the run prints the dashboard's four headline shares too. Its targets:

- **reached a checkpoint** (target 100 %): the "preserved a user-visible
  checkpoint" share: degraded workflows with no blank-state failure.
- **blank state** (target none): a blank-state failure (reported failed while
  running); at the end, a workflow that is neither terminal nor paused at an
  unresolved checkpoint; a workflow the fleet launched (its journal says so)
  that the console does not know. Listed by id.
- **resumed and completed cleanly** (target 100 %): of the resumed workflows
  (an operator's later handoff or abort aside), the share "resumed without
  data loss" counts: completed, no duplicate-effect attempt, no lost effect.
- **same owner** (target 100 %): of those resumed workflows, the ones whose
  owner did not change (the dashboard also counts handoffs, where an
  operator chose another owner).
- **ledger cross-check** (target none): what the console recorded, checked
  against what the simulated systems really did: an idempotency key they
  executed more than once (they never dedupe); an effect committed in the
  console with no execution or with a reference they never issued; an effect
  an operator confirmed as happened that has no execution; an effect of a
  completed workflow's plan that never executed.
- **acted on twice** (target none): a delivery an agent's resume endpoint
  acted on more than once, however often the console (or the lossy proxy's
  cut answers) made it send the decision again; the demo runtime journals
  each act apart from the dedupe that allows it. The demo agent would not
  execute an effect twice even then (it works from the console's record of
  what committed), so the ledgers alone would not show a broken dedupe.
- **the incident scenario** (with ``--incident``): the incident formed (at
  least its agent's threshold of members); its rollout completed and the
  incident was resolved; every member delivered exactly once, none decided by
  a regular operator; and never more of the rollout's decisions
  (``decided_at``, on the database's clock) in any window of
  ``ROLLOUT_RATE_WINDOW_SECONDS`` than its limit.
- **decisions lost** (target 0): decisions an operator was answered 302
  (recorded) for that are not in the database, plus decisions not finished
  (queued or running) after the drain.
"""
