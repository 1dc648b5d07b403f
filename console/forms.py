"""Forms for the operator actions. Templates render the fields by hand (dense
markup with stable test ids); these classes do the parsing and validation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Model, QuerySet
from django.utils import timezone

from workflows.api.json_body import BodyRejected, load_json
from workflows.models import Action, Agent, Checkpoint, Confirmation, Decider, EffectConfirmation, Reason, Team
from workflows.models.people import operators
from workflows.models.queue import CheckpointQuerySet
from workflows.shapes import JsonObject

if TYPE_CHECKING:
    from workflows.models.base import Operator
    from workflows.models.lineage import EarlierEffect


class Proposal(TypedDict):
    """A decision as DecisionForm read it: ``Decider.decide``'s keyword arguments."""

    action: str
    instructions: str
    confirmations: dict[str, str]
    confirmation_refs: dict[str, str]
    new_owner: Operator | None
    handoff_to: str
    money_confirmed: bool
    standby: Agent | None
    repeats_confirmed: list[int]


class QueueFilters(TypedDict):
    """The queue's filters as QueueFilterForm cleans them over its defaults."""

    scope: str
    reason: str
    agent: str
    kind: str
    incident: int | None
    breached: bool
    per: int
    after: str
    before: str


def error_text(form: forms.Form) -> str:
    """Every error of an invalid form as one message, for the page's flash."""
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


def choose_from(form: forms.Form, name: str, queryset: QuerySet[Model]) -> None:
    """Set what a model choice field of this form instance offers (its class declares none)."""
    field = form.fields[name]
    if not isinstance(field, forms.ModelChoiceField):
        raise TypeError(f"{type(form).__name__}.{name} is not a model choice field.")
    field.queryset = queryset


class AssignForm(forms.Form):
    to = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(),
        to_field_name="username",
        error_messages={"required": "Choose the operator to assign it to."},
    )
    note = forms.CharField(max_length=1000, required=False, strip=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choose_from(self, "to", operators())


class DecisionForm(forms.Form):
    """One form for every decision; each unknown effect adds a confirmation and a reference field.

    Effects are numbered by their position in the checkpoint's resume state, not
    named by their idempotency key: the key is agent text and has no business in
    a field name.
    """

    action = forms.ChoiceField(choices=Action.choices)
    instructions = forms.CharField(max_length=10_000, required=False, strip=True)
    new_owner = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(), to_field_name="username", required=False
    )
    handoff_to = forms.CharField(max_length=200, required=False, strip=True)
    # A handoff to a team goes to its least-loaded member working now (Team.takes_handoff).
    new_team = forms.ModelChoiceField(
        queryset=Team.objects.all(),
        to_field_name="slug",
        required=False,
        error_messages={"invalid_choice": "That team does not exist (any more)."},
    )
    money_confirmed = forms.BooleanField(required=False)
    standby = forms.ModelChoiceField(queryset=Agent.objects.none(), to_field_name="name", required=False)
    repeat = forms.TypedMultipleChoiceField(coerce=int, required=False)

    def __init__(self, *args: Any, checkpoint: Checkpoint, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checkpoint = checkpoint
        choose_from(self, "new_owner", operators())
        self.standbys = Decider(checkpoint).standbys()
        choose_from(self, "standby", Agent.objects.filter(pk__in=[a.pk for a in self.standbys]))
        # A fork's resume that runs effects the lineage committed already: one tick per effect, by name.
        self.repeated = Decider(checkpoint).repeated_effects()
        repeat = self.fields["repeat"]
        assert isinstance(repeat, forms.TypedMultipleChoiceField)
        repeat.choices = [(str(e.step_id), e.sentence()) for e in self.repeated]
        # Effects an operator confirmed ahead of the decision, from the provider's evidence (an incident's bulk
        # confirmation): shown with who, when and the reference, and the form starts from their verdict.
        self.from_evidence = {
            c.idempotency_key: c
            for c in EffectConfirmation.objects.filter(checkpoint=checkpoint).select_related("confirmed_by")
        }
        for i, effect in enumerate(checkpoint.unknown_effects):
            self.fields[f"confirm_{i}"] = forms.ChoiceField(
                choices=Confirmation.choices, required=False, widget=forms.RadioSelect
            )
            self.fields[f"ref_{i}"] = forms.CharField(max_length=200, required=False, strip=True)
            if (known := self.from_evidence.get(str(effect.get("idempotency_key") or ""))) is not None:
                self.initial.setdefault(f"confirm_{i}", known.verdict)
                self.initial.setdefault(f"ref_{i}", known.reference)

    @property
    def effects(
        self,
    ) -> list[tuple[int, JsonObject, forms.BoundField, forms.BoundField, EffectConfirmation | None]]:
        return [
            (
                i,
                effect,
                self[f"confirm_{i}"],
                self[f"ref_{i}"],
                self.from_evidence.get(str(effect.get("idempotency_key"))),
            )
            for i, effect in enumerate(self.checkpoint.unknown_effects)
        ]

    @property
    def all_confirmed(self) -> bool:
        """Every unknown effect has an answer (bound or re-rendered): resume may be enabled."""
        return all(confirm.value() in Confirmation.values for _i, _e, confirm, _r, _k in self.effects)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        # The model enforces the rule too; here it becomes an error beside the field it concerns.
        unreferenced = set(Confirmation.unreferenced(*self._answers()))
        for i, effect, _confirm, _ref, _known in self.effects:
            if effect["idempotency_key"] in unreferenced:
                self.add_error(f"ref_{i}", f"Give the external reference you saw for {effect.get('name')}.")
        if data.get("action") == Action.ABORT and not data.get("instructions"):
            self.add_error("instructions", "Say why the workflow is aborted.")
        if data.get("action") == Action.FAILOVER and not data.get("standby"):
            self.add_error("standby", "Choose the standby agent that takes the workflow over.")
        if data.get("action") == Action.HANDOFF and (team := data.get("new_team")) is not None:
            self._hand_to_team(team, data)
        return data

    def _hand_to_team(self, team: Team, data: dict[str, object]) -> None:
        if data.get("new_owner"):
            self.add_error("new_team", "Hand off to an operator or to a team, not both.")
        elif (member := team.takes_handoff(timezone.now())) is None:
            self.add_error("new_team", f"Nobody in {team.name} is working now: choose an operator.")
        else:
            data["new_owner"] = member
            data["handoff_to"] = data.get("handoff_to") or f"team {team.name}"

    def _answers(self) -> tuple[dict[str, str], dict[str, str]]:
        """The confirmations and references given, by idempotency key."""
        data = self.cleaned_data
        keys = [effect["idempotency_key"] for effect in self.checkpoint.unknown_effects]
        confirmations = {k: data[f"confirm_{i}"] for i, k in enumerate(keys) if data.get(f"confirm_{i}")}
        refs = {k: data[f"ref_{i}"] for i, k in enumerate(keys) if data.get(f"ref_{i}")}
        return confirmations, refs

    def decision_kwargs(self) -> Proposal:
        data = self.cleaned_data
        confirmations, refs = self._answers()
        return {
            "action": data["action"],
            "instructions": data.get("instructions", ""),
            "confirmations": confirmations,
            "confirmation_refs": refs,
            "new_owner": data.get("new_owner"),
            "handoff_to": data.get("handoff_to", ""),
            "money_confirmed": data.get("money_confirmed", False),
            "standby": data.get("standby"),
            "repeats_confirmed": data.get("repeat") or [],
        }


class CommentForm(forms.Form):
    body = forms.CharField(max_length=5000, strip=True, error_messages={"required": "Write something first."})


class RejectForm(forms.Form):
    # The proposer gets the checkpoint back with this note: a rejection without a reason helps nobody.
    note = forms.CharField(
        max_length=1000,
        strip=True,
        error_messages={"required": "Say why you reject it: the proposer gets the checkpoint back with your note."},
    )


class CompleteForm(forms.Form):
    summary = forms.CharField(max_length=2000, required=False, strip=True)


class QueueFilterForm(forms.Form):
    """The queue's query string. Unknown values are dropped so a stale link still renders."""

    SCOPES = [("all", "All"), ("mine", "Mine"), ("unassigned", "Unassigned"), ("approval", "Awaiting approval")]
    PAGE_SIZES = (25, 50, 100, 200)

    scope = forms.ChoiceField(choices=SCOPES, required=False)
    reason = forms.ChoiceField(choices=[("", "Any reason"), *Reason.choices], required=False)
    agent = forms.CharField(max_length=64, required=False)
    kind = forms.CharField(max_length=100, required=False)
    incident = forms.IntegerField(min_value=1, max_value=2_147_483_647, required=False)  # an incident's members
    breached = forms.BooleanField(required=False)
    per = forms.TypedChoiceField(choices=[(n, n) for n in PAGE_SIZES], coerce=int, required=False)
    after = forms.CharField(max_length=40, required=False)
    before = forms.CharField(max_length=40, required=False)

    DEFAULTS: QueueFilters = {
        "scope": "all",
        "reason": "",
        "agent": "",
        "kind": "",
        "incident": None,
        "breached": False,
        "per": 50,
        "after": "",
        "before": "",
    }

    def values(self) -> QueueFilters:
        """The valid values over the defaults (each field cleans to its key's type)."""
        self.is_valid()
        return cast(
            QueueFilters, {**self.DEFAULTS, **{k: v for k, v in self.cleaned_data.items() if v not in (None, "")}}
        )

    def narrow(self, queryset: CheckpointQuerySet) -> CheckpointQuerySet:
        """Reason, agent and kind: the filters the scope tabs count under."""
        data = self.values()
        if data["reason"]:
            queryset = queryset.filter(reason=data["reason"])
        if data["agent"]:
            queryset = queryset.filter(workflow__agent__name=data["agent"])
        if data["kind"]:
            queryset = queryset.filter(workflow__kind=data["kind"])
        if data["incident"]:
            queryset = queryset.filter(incident_id=data["incident"])
        return queryset

    def listed(self, *, user: Operator) -> CheckpointQuerySet:
        """What the scope lists before paging: the open queue, or the proposals ``user`` may approve."""
        if self.values()["scope"] == "approval":
            return self.narrow(Checkpoint.objects.awaiting_approval(by=user))
        return self.narrow(Checkpoint.objects.open())

    def in_scope(self, queryset: CheckpointQuerySet, *, user: Operator) -> CheckpointQuerySet:
        """Mine / unassigned / all (awaiting approval: as listed), and breached only."""
        data = self.values()
        if data["breached"]:
            queryset = queryset.breached()
        if data["scope"] == "mine":
            return queryset.filter(assignee=user)
        if data["scope"] == "unassigned":
            return queryset.filter(assignee__isnull=True)
        return queryset


class AgentJSONField(forms.CharField):
    """JSON an operator writes for an agent to read: held to the agent API's own limits (workflows.api.json_body:
    size, nesting depth, NUL, lone surrogates, numbers too large), so it is refused here as it would be there.
    Empty: None."""

    def to_python(self, value: str | None) -> Any:
        text = super().to_python(value)
        if not text:
            return None
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) > settings.API_MAX_BODY_BYTES:
            raise forms.ValidationError(
                f"The JSON is larger than {settings.API_MAX_BODY_BYTES} bytes, the agent API's limit.", code="too_large"
            )
        try:
            return load_json(raw)
        except BodyRejected as exc:
            where = f" (at {exc.field})" if exc.field else ""
            raise forms.ValidationError(f"{exc.message}{where}", code=exc.code) from None


class ForkForm(forms.Form):
    """Fork from step k. ``repeat``: the effects committed earlier in the lineage (step ids among ``earlier``)
    that the operator confirms the fork runs again."""

    from_seq = forms.IntegerField(min_value=1)
    reason = forms.CharField(max_length=2000, strip=True, error_messages={"required": "Say why you fork it."})
    edited_input = AgentJSONField(
        required=False, strip=True, help_text="Optional: a new input for the step forked from."
    )
    money_confirmed = forms.BooleanField(required=False)
    repeat = forms.TypedMultipleChoiceField(coerce=int, required=False)

    def __init__(self, *args: Any, earlier: list[EarlierEffect], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["repeat"]
        assert isinstance(field, forms.TypedMultipleChoiceField)
        field.choices = [(str(e.step_id), e.sentence()) for e in earlier]
