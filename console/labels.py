"""Stored values in the words people read: every status, action, reason and confirmation a page shows.

The models' enum labels are the one source ("Handed Off" -> "handed off"); the template filters ``label``
and ``confirmation`` and the event sentences (console/event_text.py) all read them here."""

from __future__ import annotations

from workflows.models import (
    Action,
    Checkpoint,
    Confirmation,
    Decision,
    Delivery,
    Reason,
    ReplayRun,
    Step,
    Workflow,
)

# By stored value. Values shared between enums ("failed", "queued") have the same label in each.
LABELS = {
    str(value): str(label).lower()
    for enum in (
        Workflow.Status,
        Checkpoint.Status,
        Decision.Status,
        ReplayRun.Status,
        Step.Status,
        Delivery.Status,
        Action,
        Reason,
    )
    for value, label in enum.choices
}


def label(value: object) -> str:
    """A status, action or reason as people read it (``handed_off`` -> "handed off"), never the stored value.
    Anything else (a workflow kind, an agent's name) is an identifier people search and filter by: as it is."""
    text = str(value or "")
    return LABELS.get(text, text)


def confirmation(value: object) -> str:
    """An operator's confirmation in words ("did not happen"), from the one Confirmation enum."""
    return str(Confirmation(str(value)).label).lower() if value in Confirmation.values else str(value)


def reason(value: object) -> str:
    """Why a checkpoint opened, in words."""
    return str(Reason(str(value)).label).lower() if value in Reason.values else str(value)
