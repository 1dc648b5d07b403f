"""Realistic volumes for benchmarks and capacity checks, loaded with PostgreSQL ``COPY``.

``generate(...)`` appends agents, workflows, their steps (JSON input and output
of a few hundred bytes, effects with idempotency keys), checkpoints in every
state (open, claimed, breached, warned, due, decided, resolved), decisions in
every delivery state, and the audit events they would have written, with ids
after the ones already there. It bypasses the ORM on purpose: a million
``Step.objects.create`` calls take an hour, ``COPY`` takes seconds. Everything
random comes from one seeded ``random.Random``.

Run it as ``manage.py generate_volume`` (see that command) or from scripts/bench/.
"""

from .breaches import generate_breach_history
from .loading import Volume, step_payload
from .runs import generate

__all__ = ["Volume", "generate", "generate_breach_history", "step_payload"]
