"""The baseline of the approve -> delivery figure: a bare Celery task that POSTs to the agent's endpoint.

Loaded only by the benchmark's worker (``celery … -I bench_tasks`` with scripts/ on PYTHONPATH).
"""

import json
import urllib.request

from celery import shared_task


@shared_task(ignore_result=True)
def post(url: str, key: str) -> None:
    body = json.dumps({"key": key}).encode()
    request = urllib.request.Request(  # noqa: S310 - the bench's own receiver
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        response.read()
