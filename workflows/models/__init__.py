"""The domain: agents, workflows and their trajectories, checkpoints, decisions, runbooks, events.

Every status change goes through ``Stateful.move``: it refuses a transition
that is not in the model's ``TRANSITIONS`` table, applies the allowed one as a
compare-and-set ``UPDATE … WHERE status = <current>`` (so racing operators and
double clicks are harmless) and writes an ``Event`` in the same transaction.

One module per noun; everything is imported from here (``from workflows.models import …``).
"""

from .action_links import ActionLinkUse
from .agents import Agent
from .base import Conflict, IllegalTransition, Invalid, Stateful, canonical, hash_token
from .breaches import BreachReason
from .broker import BrokerStatus
from .checkpoints import Checkpoint
from .comments import Comment
from .confirmations import Confirmation
from .decision_queries import DecisionQuerySet
from .decisions import Decision
from .drafting import Decider
from .drills import Drill, DrillQuerySet
from .events import Event
from .evidence import EffectConfirmation, Evidence, EvidenceError
from .forking import fork_workflow
from .identities import SignInIdentity, SignInSession
from .incidents import Hold, Incident
from .notifications import Attempt, Channel, Delivery, Notification
from .people import OperatorProfile
from .queue import CheckpointQuerySet
from .relay import wake_relay
from .replays import DriftIgnoreRule, ReplayRun, ReplayRunQuerySet
from .rollouts import Rollout
from .rollups import DailyRollup, RollupState
from .runbooks import RESUMING_ACTIONS, Action, Reason, Runbook, RunbookVersion, all_actions
from .sla import BusinessCalendar, EscalationLevel, Holiday, SLAPolicy, Terms
from .slack import SlackLink, SlackMessage, SlackRoute, SlackWorkspace
from .steps import Step
from .teams import RoutingRule, Team
from .workflows import Workflow, WorkflowQuerySet

__all__ = [
    "RESUMING_ACTIONS",
    "Action",
    "Agent",
    "Checkpoint",
    "CheckpointQuerySet",
    "Comment",
    "Confirmation",
    "Conflict",
    "Decider",
    "Decision",
    "DecisionQuerySet",
    "DriftIgnoreRule",
    "ReplayRun",
    "ReplayRunQuerySet",
    "Event",
    "IllegalTransition",
    "Invalid",
    "Reason",
    "Runbook",
    "RunbookVersion",
    "Stateful",
    "Step",
    "Workflow",
    "WorkflowQuerySet",
    "all_actions",
    "canonical",
    "fork_workflow",
    "hash_token",
    "wake_relay",
    # SLA policies and notifications
    "Attempt",
    "BusinessCalendar",
    "Channel",
    "Delivery",
    "EscalationLevel",
    "Holiday",
    "Notification",
    "OperatorProfile",
    "SLAPolicy",
    "Terms",
    "BreachReason",
    # teams and their routing rules
    "RoutingRule",
    "SignInIdentity",
    "SignInSession",
    "Team",
    # daily rollups of the recovery figures
    "DailyRollup",
    "RollupState",
    # whether the broker takes messages
    "BrokerStatus",
    # Slack as a channel
    "SlackLink",
    "SlackMessage",
    "SlackRoute",
    "SlackWorkspace",
    # email action links
    "ActionLinkUse",
    # many checkpoints with one cause, and agents on hold
    "Hold",
    "Incident",
    "Rollout",
    # bulk confirmation of unknown effects against a provider's evidence
    "EffectConfirmation",
    "Evidence",
    "EvidenceError",
    # recovery drills
    "Drill",
    "DrillQuerySet",
]
