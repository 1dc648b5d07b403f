"""The web server's only settings file, used by every launch path that runs gunicorn:
``gunicorn -c python:console.gunicorn console.wsgi`` (docker-compose.yml, the Dockerfile,
``scripts/bench.py``, ``scripts/chaos.py``; ``tests/test_gunicorn_config.py`` keeps them naming it).

Threads (gthread) rather than sync workers: an agent fleet keeps its connections open
(sync workers close every connection after one response), and a request spends much of
its time waiting for PostgreSQL, when another thread of the same process can run.
A thread still serves one connection at a time, so gunicorn is never exposed to clients
directly: the compose stack's proxy buffers slow clients in front of it (README, "Production").

The agent API's rate limits are counted in the cache: with a per-process cache, N workers
would each allow the full limit. ``on_starting`` refuses to start rather than quietly multiply it.
"""

from __future__ import annotations

import os
from typing import Any

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "30"))  # seconds an idle agent connection stays open
timeout = 30
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None

SHARED_CACHES = ("redis://", "rediss://", "memcache://", "pymemcache://", "dbcache://")


def on_starting(server: Any) -> None:
    workers = server.cfg.workers
    if workers > 1 and not os.environ.get("CACHE_URL", "").startswith(SHARED_CACHES):
        raise RuntimeError(
            f"gunicorn with {workers} workers needs a cache shared between them for the agent "
            "API's rate limits: set CACHE_URL=redis://host:6379/1 (see .env.example)."
        )
