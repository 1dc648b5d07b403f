from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Operator console"

    def ready(self) -> None:
        from . import checks, security  # sign-in audit events (signal receivers), deploy checks

        checks.register()
        security.connect_lockout_audit()
