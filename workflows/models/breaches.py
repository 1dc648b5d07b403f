"""Why a checkpoint breached its SLA: an admin-managed list of reasons, recorded by TPMs in the breach review."""

from __future__ import annotations

from django.db import models


class BreachReason(models.Model):
    name = models.CharField(max_length=100, unique=True)
    description = models.CharField(max_length=300, blank=True)
    is_active = models.BooleanField(
        default=True, help_text="Inactive reasons stay on old breaches but are no longer offered."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
