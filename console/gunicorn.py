"""The production web server's settings: ``gunicorn -c python:console.gunicorn console.wsgi``.

Threads (gthread) rather than sync workers: an agent fleet keeps its connections open
(sync workers close every connection after one response), and a request spends much of
its time waiting for PostgreSQL, when another thread of the same process can run.
"""

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "30"))  # seconds an idle agent connection stays open
timeout = 30
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None
