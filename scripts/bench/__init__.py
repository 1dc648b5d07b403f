"""The benchmark suite: every figure beside its own baseline, measured in the same run.

    make bench                                   # about 3 minutes on an idle 2-core machine
    make bench BENCH_ARGS="--full"               # + the 1M tier, 10k deliveries and 10k renders (~25 min)
    make bench BENCH_ARGS="--breach-review 1000000"  # the breach review, empty vs 1M checkpoints (~12 min)
    make bench BENCH_ARGS="--tpm-pages 1000000"  # the TPM pages: empty vs 1M workflows, daily rollups
    .venv/bin/python -m scripts.bench --only ingest,queue

Needs PostgreSQL (DATABASE_URL: the server to use; the suite creates and drops its own
``<name>_bench`` database there) and Redis (CELERY_BROKER_URL; the suite uses its database
number + 10, and CACHE_URL's number + 10 for the cache). Without PostgreSQL it runs the queue
figures only, on a throwaway SQLite file.

Each line: what, the figure, its baseline, the ratio and the target. Never a pass/fail
timing in the test suite: the machines are shared, so absolute figures are noisy and the
ratio of two things measured side by side is what counts. What each figure means:

  ingest 1 step/request, N clients   steps/s through gunicorn (console/gunicorn.py: 3 workers x 4
                                     threads, keep-alive) with N keep-alive clients, each posting ~250 B
                                     steps to its own workflow, vs the same rows inserted by psycopg with a
                                     commit per row by N connections.                      target >= 25 %
  ingest 1 step/request vs bare view the same, vs a bare Django view under the same gunicorn settings
                                     (bench/bare.py: no middleware, stdlib json, one INSERT … ON CONFLICT,
                                     one commit): what Django and HTTP cost here.          target >= 67 %
  ingest batched                     steps/s through POST /steps/batch (500 per request) vs psycopg
                                     executemany and COPY of the same rows, 500 per commit. target >= 50 %
                                     of executemany
  LangGraph PostgresSaver, N         the console's HTTP path vs langgraph-checkpoint-postgres saving the
                                     same state per step in-process at the same concurrency (ratio > 1:
                                     the console is faster); and recovery_client's batching client
                                     end to end (wf.step blocks over HTTP, 50 steps a batch) vs the
                                     same saver.                                            target > 1x
  approve -> delivery p50/p95        decision committed -> the agent endpoint receives the signed POST
                                     (relay woken by NOTIFY, Celery worker, Redis) vs a bare Celery task
                                     that POSTs to the same endpoint through the same Redis.  target p95 <= 1.5x
  SLA sweep                          one sweep with 1,000 due among the largest tier vs among 10k. <= 1.5x
  queue / workbench                  first queue page (50 rows) at the largest tier vs a trivial
                                     authenticated view in the same process (<= 3x, constant queries), and
                                     the same right after another operator claimed or released one of its
                                     rows; the workbench of a 1,000-step workflow (<= 5x)
  memory                             worker RSS after all deliveries vs after the first tenth (<= 1.10x);
                                     web (in-process) RSS after N queue renders vs after N/10 (flat)
  scaling                            the same figures at 1k, 10k, 100k (and 1M with --full) rows, as a
                                     table and as docs/bench-scaling.svg
  breach review (--breach-review N)  the TPM breach review (cards, charts, first table page, a filter, the
                                     second page by its cursor) over an empty table vs N checkpoints of a
                                     year's history (generate_breach_history, COPY, seed printed), in one
                                     process, medians; the query count beside each ratio
  incident page, N members           the incident page (blast radius, timeline, first members) of an
                                     incident of N (10,000) members vs the first queue page (50 rows), in
                                     one process, interleaved, medians; queries beside.  target <= 5x
  rollout deliveries/s               a rollout of those N members (canary, waves, rate window set out of
                                     the way), from its start to the last POST at the endpoint, vs N bare
                                     Celery tasks POSTing to the same endpoint on the same worker and
                                     Redis.                                              target >= 50 %
  TPM pages (--tpm-pages N)          the resume dashboard, a drill-down, readiness, the staffing budget
                                     and the breach review over an empty database vs N generated workflows
                                     (COPY, seed printed), after rollups.rebuild() rolled them up as
                                     `manage.py rebuild_rollups` does: median of the rounds, ratio and
                                     SQL queries side by side
  capacity (--capacity)              operators polling the queue and a workbench every 3 s (204 while
                                     nothing changed) while rows are claimed and released, and agents
                                     reporting steps, doubled level by level until p95 page > 300 ms or p95
                                     step > 100 ms: the largest load held, per machine and per core
"""
