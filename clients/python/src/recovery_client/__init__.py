"""Connect an agent runtime to Recovery Console: report workflows, steps and checkpoints; receive decisions.

Standard library only (no Django). ``RecoveryClient`` has one method per
endpoint of Agent API v1 and retries what is safe to retry;
``client.workflow(...)`` with ``wf.step(...)``/``wf.effect(...)`` reports a run
as it happens and turns its failures into checkpoints; ``ResumeReceiver``
takes the operator's decisions on a resume endpoint; ``AsyncRecoveryClient``
does the same under asyncio. Framework adapters live in
``recovery_client.langgraph`` and ``recovery_client.openai_agents``.
"""

from .aio import AsyncRecoveryClient, AsyncStepScope, AsyncWorkflow
from .batching import Batching
from .client import ApiError, Json, RecoveryClient, Unavailable
from .drills import (
    GARBAGE,
    DrillCrash,
    DrillFailover,
    DrillFault,
    DrillRateLimitError,
    GarbageAnswer,
    ProviderChanged,
    drifted,
)
from .reasons import REASONS, InvalidOutput, Reason, ReasonMap, reason_for
from .receiver import Delivery, DeliveryLog, MemoryDeliveryLog, ResumeReceiver, SQLiteDeliveryLog
from .signing import sign, verify_signature
from .workflow import Decision, Paused, StepScope, Stopped, Workflow, jsonable

__all__ = [
    "GARBAGE",
    "REASONS",
    "ApiError",
    "Batching",
    "DrillCrash",
    "DrillFailover",
    "DrillRateLimitError",
    "ProviderChanged",
    "drifted",
    "DrillFault",
    "GarbageAnswer",
    "AsyncRecoveryClient",
    "AsyncStepScope",
    "AsyncWorkflow",
    "Decision",
    "Delivery",
    "DeliveryLog",
    "InvalidOutput",
    "Json",
    "MemoryDeliveryLog",
    "Paused",
    "Reason",
    "ReasonMap",
    "RecoveryClient",
    "ResumeReceiver",
    "SQLiteDeliveryLog",
    "StepScope",
    "Stopped",
    "Unavailable",
    "Workflow",
    "jsonable",
    "reason_for",
    "sign",
    "verify_signature",
]
__version__ = "0.1.0"
