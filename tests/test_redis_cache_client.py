"""The Redis cache keeps one client per connection pool (console/cache.py) and still works as Django's."""

import os
import subprocess
import sys
import threading

import pytest
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache

from console.cache import RedisCache


@pytest.fixture
def redis_cache():
    broker = os.environ["CELERY_BROKER_URL"]
    cache = RedisCache(broker.rsplit("/", 1)[0] + "/14", {"KEY_PREFIX": "test-cache-client"})
    yield cache
    cache.clear()


def test_a_redis_cache_url_gets_the_reusing_backend_and_any_other_keeps_its_own():
    """Read from the settings as each deployment gets them (a fresh interpreter per CACHE_URL)."""

    def backend(cache_url: str) -> str:
        env = {**os.environ, "CACHE_URL": cache_url, "SECRET_KEY": "x", "DJANGO_SETTINGS_MODULE": "console.settings"}
        return subprocess.run(
            [sys.executable, "-c", "from django.conf import settings; print(settings.CACHES['default']['BACKEND'])"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    assert backend("redis://127.0.0.1:6379/1") == "console.cache.RedisCache"
    assert backend("locmemcache://") == "django.core.cache.backends.locmem.LocMemCache"
    assert issubclass(RedisCache, DjangoRedisCache)


@pytest.mark.redis
def test_one_client_serves_every_call_and_the_cache_behaves_as_django_s(redis_cache):
    first = redis_cache._cache.get_client()
    assert redis_cache._cache.get_client() is first  # Django builds a new one here each time

    redis_cache.set("k", {"v": 1}, 30)
    assert redis_cache.get("k") == {"v": 1}
    assert redis_cache.add("n", 1, 30) and not redis_cache.add("n", 5, 30)
    assert redis_cache.incr("n") == 2
    redis_cache.delete("k")
    assert redis_cache.get("k") is None


@pytest.mark.redis
def test_threads_sharing_the_client_count_every_increment(redis_cache):
    redis_cache.set("shared", 0, 60)

    def bump():
        for _ in range(200):
            redis_cache.incr("shared")

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert redis_cache.get("shared") == 800


@pytest.mark.redis
def test_incr_is_one_round_trip_and_never_creates_a_missing_key(redis_cache, monkeypatch):
    client = redis_cache._cache.get_client(write=True)
    redis_cache.set("counted", 5, 60)
    redis_cache.incr("counted")  # the script is loaded on first use
    sent = []
    original = type(client).execute_command
    monkeypatch.setattr(
        type(client), "execute_command", lambda self, *args, **kw: sent.append(args[0]) or original(self, *args, **kw)
    )

    assert redis_cache.incr("counted") == 7
    assert redis_cache.incr("counted", 3) == 10
    assert len(sent) == 2  # one command per increment (Django's own sends EXISTS, then INCRBY)
    with pytest.raises(ValueError, match="not found"):
        redis_cache.incr("missing")
    assert redis_cache.get("missing") is None
    assert redis_cache.get("counted") == 10
