from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self) -> None:
        from .slack import outbox

        outbox.connect()  # every event about a checkpoint marks its Slack messages behind
