import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()



@worker_init.connect
def repair_broker_folder(**kwargs: Any) -> None:
    """A worker of the embedded default starts even when a full disk left a broken exchange table."""
    from workflows.models.broker import repair_folder_broker

    repair_folder_broker()
