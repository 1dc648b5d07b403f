import os
from typing import Any

from celery import Celery
from celery.signals import (
    task_postrun,
    task_prerun,
    task_received,
    worker_init,
    worker_ready,
    worker_shutting_down,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def close_old_database_connections(task: Any = None, **kwargs: object) -> None:
    """Around each task, Django's request rules for its connections: closed past CONN_MAX_AGE or when an error
    left them unusable, health-checked at first use (CONN_HEALTH_CHECKS). Celery's fix-up, told to reuse the
    connection (settings.CELERY_DB_REUSE_MAX), no longer closes it around every task. Not for a task run in
    the caller's process (eager), whose connection and transaction are the caller's."""
    from django.db import close_old_connections, connections

    if getattr(getattr(task, "request", None), "is_eager", False):
        return
    if any(conn.in_atomic_block for conn in connections.all(initialized_only=True)):
        return
    close_old_connections()


@worker_init.connect
def quiet_idle_task_lines(**kwargs: object) -> None:
    """Before the pool forks: a sweep that found nothing to do leaves no line (console/worker_logs.py)."""
    from django.conf import settings

    from . import worker_logs

    worker_logs.install(
        {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}, quiet=settings.QUIET_POLL_LOGS
    )


@worker_init.connect
def repair_broker_folder(**kwargs: object) -> None:
    """A worker of the embedded default starts even when a full disk left a broken exchange table."""
    from workflows.models.broker import repair_folder_broker

    repair_folder_broker()


@worker_ready.connect
def start_consumer_watchdog(sender: Any, **kwargs: object) -> None:
    """On a Redis broker, a worker whose consumer stalls exits to be started again (console/watchdog.py)."""
    import threading

    from django.conf import settings

    from . import watchdog

    seconds = settings.WORKER_WATCHDOG_SECONDS
    if not seconds or not str(app.conf.broker_url).startswith(("redis://", "rediss://")):
        return
    queues = sorted({queue.name for queue in sender.task_consumer.queues})
    concurrency = int(getattr(sender.controller, "concurrency", None) or 1)
    dog = watchdog.ConsumerWatchdog(
        watchdog.queue_backlog(app, queues),
        stall_seconds=seconds,
        busy=watchdog.full(concurrency * int(app.conf.worker_prefetch_multiplier or 1)),
    )
    task_received.connect(lambda **_: dog.took(), weak=False, dispatch_uid="consumer-watchdog")
    stop = threading.Event()
    worker_shutting_down.connect(lambda **_: stop.set(), weak=False, dispatch_uid="consumer-watchdog-stop")
    watchdog.watch(dog, interval=min(10.0, seconds / 3), stop=stop, leave=watchdog.leave_process)
