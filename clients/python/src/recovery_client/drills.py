"""Recovery drills: the fault the console asks for happens here, in the agent's process (docs/API.md, "Drills").

The console tells a drilled run its fault in the answer to a step report
(``{"instruction": {"drill": {"id", "fault", "at_seq", "silent_minutes"}}}``); the run's ``Workflow``
keeps it as ``wf.drill`` and carries it out when the run reaches step ``at_seq``:

- ``crash_after_step``: once step k is committed, ``DrillCrash`` is raised. It is a ``BaseException``
  (like ``SystemExit``), so neither the step nor the workflow turns it into a checkpoint: to the console
  the run simply stops talking, as a crashed process does, and its silence watchdog opens the checkpoint.
- ``garbage_at_step``: step k's output is replaced by ``GARBAGE``. A step that checks its output
  (``scope.verify``) runs its own check on the garbage (a refusal is a ``tool_error`` checkpoint, as any
  invalid output); a step that checks nothing is stopped by the client with ``GarbageAnswer``
  (``untrusted_output``): the drill then reports that this step takes model output unchecked.

The other faults (silence, a rate-limit storm, failover, a provider change) are not carried out by this
client yet; ``wf.drill`` holds them for the runtime to act on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["GARBAGE", "DrillCrash", "DrillFault", "GarbageAnswer"]

# What a model answers in a "garbage" drill: not JSON, not the shape any check expects.
GARBAGE: Final = "\ufffd<drill: garbage answer>\x7f{{{"


@dataclass(frozen=True)
class DrillFault:
    """A drill's instruction as the console sent it."""

    drill_id: str
    fault: str
    at_seq: int
    silent_minutes: int = 0

    @classmethod
    def from_instruction(cls, instruction: Any) -> DrillFault | None:
        drill = instruction.get("drill") if isinstance(instruction, dict) else None
        if not isinstance(drill, dict) or not drill.get("fault"):
            return None
        try:
            return cls(str(drill.get("id", "")), str(drill["fault"]), int(drill.get("at_seq") or 1),
                       int(drill.get("silent_minutes") or 0))
        except (TypeError, ValueError):
            return None

    def crashes_after(self, seq: int) -> bool:
        return self.fault == "crash_after_step" and seq == self.at_seq

    def garbles(self, seq: int) -> bool:
        return self.fault == "garbage_at_step" and seq == self.at_seq


class DrillCrash(BaseException):
    """The drill's crash: the run stops as a killed process does, without a word to the console."""


class GarbageAnswer(Exception):
    """A drill's garbage answer reached a step that does not check its output: ``untrusted_output``."""

    recovery_reason = "untrusted_output"
