"""Bulk confirmation of unknown effects against a provider's evidence.

An incident's members often stop with effects whose outcome the agent could not know (the refund
call timed out: did the provider make it?). One at a time, the operator looks each one up and
confirms it on its workbench. In bulk, the operator pastes or uploads the provider's list of
references (what its dashboard or export says was done), and the console matches each line to the
unknown effects **exactly**: only the whitespace around a value is dropped. Case, Unicode forms and
look-alike letters are never folded — an id with a Cyrillic "а", an "O" for a "0" or a trailing
zero-width space is another id, and the preview says which effect it looks like and why it is not it.

Nothing is confirmed by reading the evidence: ``Evidence.submit`` keeps the text and the preview
shows matched / unmatched (references with no effect, effects with no reference). A second submit,
``Evidence.apply``, confirms the matched effects as happened with the provider's reference, and the
unmatched ones as "did not happen" only on an explicit tick, each checked by the same rule a single
decision applies (``Decider.check_confirmations``) and recorded as an ``EffectConfirmation`` that the
member's decision (a rollout's, or the operator's own) carries. It refuses when the matching changed
since the preview (another confirmation, a member decided meanwhile), so what is confirmed is what was
read.

A line is ``KEY`` or ``KEY,REFERENCE`` (comma, tab or semicolon, read line by line): KEY is the idempotency key
the agent sent the provider (or the reference the agent reported with the effect), REFERENCE the provider's own
id for what it did (the key itself when the line has none). A first line naming its columns
(``idempotency_key,reference``) is skipped.
"""

from __future__ import annotations

import csv
import hashlib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from ..identifiers import scripts
from .base import Conflict, Stateful
from .checkpoints import Checkpoint
from .confirmations import Confirmation
from .drafting import Decider
from .events import Event
from .incidents import Incident

if TYPE_CHECKING:
    from .base import Operator

User = settings.AUTH_USER_MODEL

MAX_BYTES = 1_000_000
MAX_LINES = 20_000
HEADER_CELLS = {"idempotency_key", "key", "reference", "ref", "id", "external_ref"}


class EvidenceError(ValueError):
    """The evidence cannot be read: empty, too big, binary, or not UTF-8 text. Nothing was kept."""


# --- reading the evidence ---------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    number: int
    key: str
    reference: str


def text_of(data: bytes) -> str:
    """Uploaded bytes as text, or EvidenceError saying why they are not a list of references."""
    if len(data) > MAX_BYTES:
        raise EvidenceError(f"The file is {len(data):,} bytes: at most {MAX_BYTES:,} are read. Split it.")
    if b"\x00" in data:
        raise EvidenceError("This is a binary file, not a list of references: export it as CSV or text.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvidenceError(
            f"The file is not UTF-8 text (byte {exc.start + 1} cannot be read): export it as UTF-8 CSV or text."
        ) from None


def read_lines(text: str) -> list[Line]:
    """The references of a pasted or uploaded list, each with its line number. EvidenceError when the text
    is empty, too big or holds control characters (a binary file pasted or renamed)."""
    text = text.removeprefix("\ufeff")
    if len(text.encode()) > MAX_BYTES:
        raise EvidenceError(f"The list is longer than {MAX_BYTES:,} bytes: split it.")
    if bad := next((ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in "\t\r\n"), None):
        raise EvidenceError(
            f"The list holds a control character (U+{ord(bad):04X}): this is not text from a provider's export."
        )
    rows = text.splitlines()
    if len(rows) > MAX_LINES:
        raise EvidenceError(f"The list has {len(rows):,} lines: at most {MAX_LINES:,} are read. Split it.")
    lines: list[Line] = []
    for number, row in enumerate(rows, start=1):
        # Each line its own separator: a list pasted from two exports (one CSV, one TSV) still reads.
        delimiter = next((d for d in ("\t", ",", ";") if d in row), ",")
        cells = [c.strip() for c in next(csv.reader([row], delimiter=delimiter), [])]
        # str.strip: surrounding whitespace only, never a zero-width character.
        if not cells or not cells[0]:
            continue
        if not lines and cells[0].lower() in HEADER_CELLS:
            continue
        reference = cells[1] if len(cells) > 1 and cells[1] else cells[0]
        lines.append(Line(number, cells[0][:200], reference[:200]))
    if not lines:
        raise EvidenceError("The list is empty: paste the provider's references, one a line.")
    return lines


# --- look-alikes: only to explain why a line matched nothing, never to match --------------------

_INVISIBLE = {"Cf", "Mn", "Me"}
_CONFUSABLE = str.maketrans(
    {
        "а": "a",
        "е": "e",
        "о": "o",
        "р": "p",
        "с": "c",
        "х": "x",
        "у": "y",
        "і": "l",
        "ј": "j",
        "ѕ": "s",
        "к": "k",
        "м": "m",
        "т": "t",
        "в": "b",
        "н": "h",
        "ο": "o",
        "α": "a",
        "ρ": "p",
        "ν": "v",
        "τ": "t",
        "ι": "l",
        "κ": "k",
        "0": "o",
        "1": "l",
        "i": "l",
        "|": "l",
        "5": "s",
        "‐": "-",
        "‑": "-",
        "–": "-",
        "—": "-",
        "−": "-",
    }
)


def skeleton(value: str) -> str:
    """What a reader sees: compatibility forms folded, case folded, invisible marks dropped, look-alike
    letters and digits mapped to one (after UTS #39's confusable skeletons, for the common ones)."""
    folded = unicodedata.normalize("NFKC", value).casefold()
    visible = "".join(ch for ch in folded if unicodedata.category(ch) not in _INVISIBLE)
    return visible.translate(_CONFUSABLE)


def why_different(seen: str, key: str) -> str:
    """Why ``seen`` is not ``key`` though it looks like it, in words an operator can check."""
    if seen.casefold() == key.casefold():
        return "differs only in upper/lower case"
    if invisible := [ch for ch in seen if unicodedata.category(ch) in _INVISIBLE]:
        return "holds an invisible character (" + ", ".join(f"U+{ord(ch):04X}" for ch in invisible[:3]) + ")"
    if len(scripts(seen)) > 1:
        return "mixes " + " + ".join(sorted(s.title() for s in scripts(seen))) + " letters"
    pairs = [(a, b) for a, b in zip(seen, key, strict=False) if a != b]
    if pairs:
        a, b = pairs[0]
        return f"has “{a}” (U+{ord(a):04X}) where the key has “{b}” (U+{ord(b):04X})"
    return "is written differently"


# --- matching ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnknownEffect:
    checkpoint_id: int
    key: str
    name: str
    external_ref: str
    workflow_title: str


@dataclass(frozen=True)
class Matched:
    effect: UnknownEffect
    line: Line


@dataclass(frozen=True)
class Unmatched:
    line: Line
    looks_like: UnknownEffect | None = None
    why: str = ""


@dataclass
class Matching:
    matched: list[Matched] = field(default_factory=list)
    unmatched_lines: list[Unmatched] = field(default_factory=list)
    unmatched_effects: list[UnknownEffect] = field(default_factory=list)
    repeated_lines: list[Line] = field(default_factory=list)

    @property
    def digest(self) -> str:
        """What the preview showed, as a short hash: ``apply`` refuses when the matching changed since."""
        facts = sorted((m.effect.checkpoint_id, m.effect.key, m.line.reference) for m in self.matched)
        facts += sorted((0, e.key, f"effect:{e.checkpoint_id}") for e in self.unmatched_effects)
        return hashlib.sha256(repr(facts).encode()).hexdigest()[:24]

    def summary(self) -> dict[str, int]:
        return {
            "matched": len(self.matched),
            "unmatched_references": len(self.unmatched_lines),
            "unmatched_effects": len(self.unmatched_effects),
            "repeated": len(self.repeated_lines),
        }


def match(lines: Iterable[Line], effects: Iterable[UnknownEffect]) -> Matching:
    """Each line to the unknown effect whose idempotency key (or reported reference) is exactly its key."""
    effects = list(effects)
    by_value: dict[str, UnknownEffect] = {}
    for effect in effects:
        by_value.setdefault(effect.key, effect)
        if effect.external_ref:
            by_value.setdefault(effect.external_ref, effect)
    by_skeleton: dict[str, tuple[UnknownEffect, str]] = {}
    for value, effect in by_value.items():
        by_skeleton.setdefault(skeleton(value), (effect, value))
    result, taken = Matching(), set()
    for line in lines:
        found = by_value.get(line.key)
        if found is None:
            near = by_skeleton.get(skeleton(line.key))
            result.unmatched_lines.append(
                Unmatched(line, near[0], why_different(line.key, near[1])) if near else Unmatched(line)
            )
        elif (found.checkpoint_id, found.key) in taken:
            result.repeated_lines.append(line)
        else:
            taken.add((found.checkpoint_id, found.key))
            result.matched.append(Matched(found, line))
    result.unmatched_effects = [e for e in effects if (e.checkpoint_id, e.key) not in taken]
    return result


# --- the records --------------------------------------------------------------------------------


class EffectConfirmationQuerySet(models.QuerySet["EffectConfirmation"]):
    def verdicts_of(self, checkpoint_ids: Iterable[int]) -> dict[int, tuple[dict[str, str], dict[str, str]]]:
        """(confirmations, references) for ``Decider.draft`` of each checkpoint, what was confirmed ahead of its
        decision, in one query for many (a rollout's wave), by checkpoint id; one with nothing confirmed ahead
        is left out."""
        found: dict[int, tuple[dict[str, str], dict[str, str]]] = {}
        rows = self.filter(checkpoint_id__in=list(checkpoint_ids)).values_list(
            "checkpoint_id", "idempotency_key", "verdict", "reference"
        )
        for pk, key, verdict, reference in rows:
            confirmations, references = found.setdefault(pk, ({}, {}))
            confirmations[key] = verdict
            if reference:
                references[key] = reference
        return found


class EffectConfirmation(models.Model):
    """An unknown effect confirmed ahead of its checkpoint's decision (from evidence), carried by it."""

    # No index of its own: it leads one_confirmation_per_unknown_effect.
    checkpoint = models.ForeignKey(
        Checkpoint, on_delete=models.CASCADE, related_name="effect_confirmations", db_index=False
    )
    idempotency_key = models.CharField(max_length=200)
    verdict = models.CharField(max_length=16, choices=Confirmation.choices)
    reference = models.CharField(max_length=200, blank=True)
    evidence = models.ForeignKey(
        "workflows.Evidence", null=True, blank=True, on_delete=models.SET_NULL, related_name="confirmations"
    )
    confirmed_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    confirmed_at = models.DateTimeField(default=timezone.now)

    objects = EffectConfirmationQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint", "idempotency_key"], name="one_confirmation_per_unknown_effect"
            )
        ]

    def __str__(self) -> str:
        return f"{self.idempotency_key}: {self.verdict}"


def unconfirmed_effects(incident: Incident) -> list[UnknownEffect]:
    """The unknown effects of the incident's members still waiting for a decision, not yet confirmed."""
    # Only the members that kept unknown effects when they opened (or kept nothing: a row written without
    # ``at_stake``) have their resume states read: not thousands of them for an incident with none.
    members = (
        incident.members.open()
        .filter(Q(at_stake__isnull=True) | Q(at_stake__unknown_effects__gt=0))
        .select_related("workflow")
        .order_by("due_at", "pk")
    )
    confirmed = set(
        EffectConfirmation.objects.filter(checkpoint__in=members).values_list("checkpoint_id", "idempotency_key")
    )
    return [
        UnknownEffect(
            c.pk,
            str(e.get("idempotency_key") or ""),
            str(e.get("name") or ""),
            str(e.get("external_ref") or ""),
            c.workflow.title,
        )
        for c in members
        for e in c.unknown_effects
        if e.get("idempotency_key") and (c.pk, e["idempotency_key"]) not in confirmed
    ]


class EvidenceStatus(models.TextChoices):
    PREVIEWED = "previewed"
    APPLIED = "applied"


class Evidence(Stateful):
    """A provider's list of references submitted for an incident: kept as submitted, matched on preview,
    applied once."""

    Status = EvidenceStatus
    TRANSITIONS = {Status.PREVIEWED: {Status.APPLIED}}

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="evidence")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PREVIEWED)
    text = models.TextField()
    filename = models.CharField(max_length=200, blank=True, help_text="Empty: pasted.")
    submitted_by = models.ForeignKey(User, on_delete=models.PROTECT, related_name="+")
    submitted_at = models.DateTimeField(default=timezone.now)
    summary = models.JSONField(default=dict, blank=True, help_text="What was confirmed when it was applied.")

    class Meta:
        ordering = ["-submitted_at", "-pk"]

    def __str__(self) -> str:
        return f"Evidence {self.pk} for incident {self.incident_id}"

    @classmethod
    def submit(cls, incident: Incident, *, text: str, by: Operator, filename: str = "") -> Evidence:
        """Keep the list for its preview; EvidenceError (and nothing kept) when it cannot be read."""
        read_lines(text)
        if incident.is_resolved:
            raise Conflict("The incident is resolved.")
        return cls.objects.create(incident=incident, text=text, filename=filename[:200], submitted_by=by)

    def lines(self) -> list[Line]:
        return read_lines(self.text)

    def matching(self) -> Matching:
        return match(self.lines(), unconfirmed_effects(self.incident))

    def apply(self, *, by: Operator, digest: str, did_not_happen: bool = False) -> Matching:
        """Confirm what the preview showed: the matched effects as happened with their reference, and the
        unmatched ones as "did not happen" only when ``did_not_happen`` is ticked. Conflict when it was
        applied already or the matching changed since the preview (``digest``): nothing is confirmed."""
        with transaction.atomic():
            if not Evidence.objects.select_for_update().filter(pk=self.pk, status=self.Status.PREVIEWED).exists():
                raise Conflict("This evidence was applied already.")
            result = self.matching()
            if result.digest != digest:
                raise Conflict(
                    "The unknown effects changed since the preview (a member was decided or confirmed "
                    "meanwhile): nothing was confirmed. Check the new preview and confirm again."
                )
            verdicts: dict[int, dict[str, tuple[str, str]]] = {}
            for m in result.matched:
                verdicts.setdefault(m.effect.checkpoint_id, {})[m.effect.key] = (
                    Confirmation.HAPPENED,
                    m.line.reference,
                )
            if did_not_happen:
                for e in result.unmatched_effects:
                    verdicts.setdefault(e.checkpoint_id, {})[e.key] = (Confirmation.DID_NOT_HAPPEN, "")
            for checkpoint in Checkpoint.objects.filter(pk__in=verdicts).select_related("workflow"):
                self._confirm(checkpoint, verdicts[checkpoint.pk], by=by)
            summary = {**result.summary(), "did_not_happen": len(result.unmatched_effects) if did_not_happen else 0}
            self.move(
                self.Status.APPLIED,
                verb=Event.Verb.EVIDENCE_APPLIED,
                actor=by,
                summary=summary,
                data={"evidence": self.pk, **summary},
            )
            Event.record(
                self.incident,
                Event.Verb.EVIDENCE_APPLIED,
                actor=by,
                data={"evidence": self.pk, "filename": self.filename, **summary},
            )
        return result

    def _confirm(self, checkpoint: Checkpoint, verdicts: dict[str, tuple[str, str]], *, by: Operator) -> None:
        confirmations = {key: verdict for key, (verdict, _) in verdicts.items()}
        references = {key: reference for key, (_, reference) in verdicts.items() if reference}
        Decider(checkpoint).check_confirmations(confirmations, references)  # the single decision's rule
        EffectConfirmation.objects.bulk_create(
            [
                EffectConfirmation(
                    checkpoint=checkpoint,
                    idempotency_key=key,
                    verdict=verdict,
                    reference=reference,
                    evidence=self,
                    confirmed_by=by,
                )
                for key, (verdict, reference) in verdicts.items()
            ]
        )
        Event.record(
            checkpoint,
            Event.Verb.EFFECTS_CONFIRMED,
            actor=by,
            data={"evidence": self.pk, "confirmations": confirmations, "confirmation_refs": references},
        )


def preview_facts(result: Matching) -> dict[str, object]:
    """The matching as the incident page lists it (the first 200 of each list)."""
    return {
        "matched": result.matched[:200],
        "unmatched_lines": result.unmatched_lines[:200],
        "unmatched_effects": result.unmatched_effects[:200],
        "repeated_lines": result.repeated_lines[:50],
        "summary": result.summary(),
        "digest": result.digest,
    }
