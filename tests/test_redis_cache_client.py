"""The Redis cache keeps one client per connection pool (console/cache.py) and still works as Django's."""

import os
import threading

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache

from console.cache import RedisCache

pytestmark = pytest.mark.redis


@pytest.fixture
def redis_cache():
    broker = os.environ["CELERY_BROKER_URL"]
    cache = RedisCache(broker.rsplit("/", 1)[0] + "/14", {"KEY_PREFIX": "test-cache-client"})
    yield cache
    cache.clear()


def test_the_settings_swap_django_s_redis_cache_for_the_reusing_one():
    if settings.CACHES["default"]["BACKEND"].endswith("LocMemCache"):
        pytest.skip("the default cache here is per process (no CACHE_URL)")
    assert settings.CACHES["default"]["BACKEND"] == "console.cache.RedisCache"
    assert isinstance(caches["default"], DjangoRedisCache)


def test_one_client_serves_every_call_and_the_cache_behaves_as_django_s(redis_cache):
    first = redis_cache._cache.get_client()
    assert redis_cache._cache.get_client() is first  # Django builds a new one here each time

    redis_cache.set("k", {"v": 1}, 30)
    assert redis_cache.get("k") == {"v": 1}
    assert redis_cache.add("n", 1, 30) and not redis_cache.add("n", 5, 30)
    assert redis_cache.incr("n") == 2
    redis_cache.delete("k")
    assert redis_cache.get("k") is None


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
