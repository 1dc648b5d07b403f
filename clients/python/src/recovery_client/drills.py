"""Recovery drills: the fault the console asks for happens here, in the agent's process (docs/API.md, "Drills").

The console tells a drilled run its fault in the answer to a step report (single or batch:
``{"instruction": {"drill": {"id", "fault", "at_seq", "silent_minutes"}}}``); the run's ``Workflow``
keeps it as ``wf.drill`` and carries it out when the run reaches step ``at_seq`` (k). The plain client
(``wf.step``/``wf.effect``) and both adapters carry out every fault the same way:

- ``crash_after_step``: once step k is committed (and reported: a batching client flushes first),
  ``DrillCrash`` is raised. It is a ``BaseException`` (like ``SystemExit``), so neither the step nor the
  workflow turns it into a checkpoint: to the console the run simply stops talking, as a crashed process
  does, and its silence watchdog opens the checkpoint.
- ``garbage_at_step``: step k's answer is replaced by ``GARBAGE``. A step that checks its output
  (``scope.verify``; the LangGraph adapter's ``checks=``) runs its own check on the garbage (a refusal is a
  ``tool_error`` checkpoint, as any invalid output); a step that checks nothing is stopped by the client with
  ``GarbageAnswer`` (``untrusted_output``): the drill then reports that this step takes model output unchecked.
- ``go_silent``: after step k is committed and reported, the run says nothing for ``silent_minutes`` (no step,
  no heartbeat, nothing buffered left to send), waiting on the client's ``drill_sleep`` (``time.sleep`` unless
  a test gives a clock). Then it comes back: when the console's silence watchdog paused the workflow
  meanwhile, the run raises ``Paused`` at that checkpoint, as at any other; else it carries on.
- ``rate_limit_storm``: from step k on, every model and tool call raises ``DrillRateLimitError`` (HTTP 429,
  named like the providers' ``RateLimitError``) instead of running, as a throttling provider answers: the step
  fails and the checkpoint reason is ``rate_limit``.
- ``failover``: the runtime hands over as ``make failover-drill`` does: step k runs (an effect executes) and
  the process dies before reporting its outcome (``DrillFailover``, a ``DrillCrash``), so the step stays
  ``pending`` with an unknown outcome. The silence watchdog opens the checkpoint, an operator confirms the
  effect and fails the workflow over to a standby agent, which carries it on; this process, if it comes back,
  is stood down (409 ``stood_down``).
- ``provider_change``: the replay drift switch: from step k on, every model step's answer differs from what
  the model would have said (``drifted``: its numbers scaled by 100, as a provider that starts answering
  amounts in cents; an answer without numbers is wrapped). A step that checks its output runs the check on
  the drifted answer, and a refusal is a ``provider_change`` checkpoint (``ProviderChanged``: the client knows
  the answer came from the changed provider); a step that checks nothing is stopped the same way.

Once the workflow has a checkpoint the console stops sending the instruction, so a resumed run does not
repeat the fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from .reasons import InvalidOutput

__all__ = [
    "GARBAGE",
    "DrillCrash",
    "DrillFailover",
    "DrillFault",
    "DrillRateLimitError",
    "GarbageAnswer",
    "ProviderChanged",
    "drifted",
]

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
            return cls(
                str(drill.get("id", "")),
                str(drill["fault"]),
                int(drill.get("at_seq") or 1),
                int(drill.get("silent_minutes") or 0),
            )
        except (TypeError, ValueError):
            return None

    def crashes_after(self, seq: int) -> bool:
        return self.fault == "crash_after_step" and seq == self.at_seq

    def garbles(self, seq: int) -> bool:
        return self.fault == "garbage_at_step" and seq == self.at_seq

    def silences_after(self, seq: int) -> bool:
        return self.fault == "go_silent" and seq == self.at_seq

    def throttles(self, seq: int, kind: str) -> bool:
        """A rate-limit storm refuses this model or tool call."""
        return self.fault == "rate_limit_storm" and seq >= self.at_seq and kind in ("model", "tool")

    def fails_over_at(self, seq: int) -> bool:
        return self.fault == "failover" and seq == self.at_seq

    def drifts(self, seq: int, kind: str) -> bool:
        """A provider change: this model step answers differently."""
        return self.fault == "provider_change" and seq >= self.at_seq and kind == "model"

    @property
    def silence_seconds(self) -> float:
        return 60.0 * self.silent_minutes

    def answer(self, seq: int, kind: str, output: Any) -> tuple[Any, type[Exception] | None]:
        """Step ``seq``'s answer under this drill, and the error that stops it when the step checks nothing."""
        if self.garbles(seq):
            return GARBAGE, GarbageAnswer
        if self.drifts(seq, kind):
            return drifted(output), ProviderChanged
        return output, None


class DrillCrash(BaseException):
    """The drill's crash: the run stops as a killed process does, without a word to the console."""


class DrillFailover(DrillCrash):
    """The drill's failover: the process dies in step k, before reporting its outcome; a standby takes over."""


class DrillRateLimitError(Exception):
    """A rate-limit storm: the call is refused as a provider throttling the agent refuses it (HTTP 429)."""

    status_code = 429
    recovery_reason = "rate_limit"


class ProviderChanged(InvalidOutput):
    """A provider change: the model answered differently from what was recorded, and the step refused it
    (or checks nothing): ``provider_change``."""

    recovery_reason = "provider_change"


class GarbageAnswer(Exception):
    """A drill's garbage answer reached a step that does not check its output: ``untrusted_output``."""

    recovery_reason = "untrusted_output"


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def drifted(value: Any) -> Any:
    """``value`` as a changed provider answers it: every number scaled by 100 (amounts in cents), in JSON
    numbers and inside strings alike; an answer without a number comes back wrapped, so it differs anyway."""
    changed = _scaled(value)
    return changed if changed != value else {"answer": value, "provider": "changed"}


def _scaled(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value * 100
    if isinstance(value, str):
        return _NUMBER.sub(lambda m: _cents(m.group()), value)
    if isinstance(value, dict):
        return {k: _scaled(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scaled(v) for v in value]
    return value


def _cents(number: str) -> str:
    whole = float(number) * 100
    return str(int(whole)) if whole.is_integer() else f"{whole:.2f}"
