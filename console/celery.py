import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def setup_periodic_tasks(sender: Celery, **kwargs: object) -> None:
    from django.conf import settings

    sender.add_periodic_task(settings.SWEEP_INTERVAL_SECONDS, "workflows.tasks.sweep", name="sweep")
