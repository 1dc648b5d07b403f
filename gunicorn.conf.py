"""gunicorn reads this file from the working directory (the Docker image's /app) on every start."""

import os

# The agent API's rate limits are counted in the cache: with a per-process cache, N workers
# would each allow the full limit. Refuse to start rather than quietly multiply it.
SHARED_CACHES = ("redis://", "rediss://", "memcache://", "pymemcache://", "dbcache://")


def on_starting(server):  # gunicorn's hook signature
    workers = server.cfg.workers
    if workers > 1 and not os.environ.get("CACHE_URL", "").startswith(SHARED_CACHES):
        raise RuntimeError(f"gunicorn with {workers} workers needs a cache shared between them for the agent "
                           "API's rate limits: set CACHE_URL=redis://host:6379/1 (see .env.example).")
