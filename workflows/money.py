"""Money: what a resume can move, by a rule that fails safe.

An effect is treated as moving money unless the console can tell that it does not. It moves money when

- a money-like value sits anywhere in its input (a recorded effect) or on it (a planned step), at any
  depth and under any spelling of the key: ``amount``, ``Amount``, ``refundAmount``, ``total``,
  ``price``, ``{"refund": {"amount": …}}``, minor units (``amount_cents``, ``*_minor``), a ``value``
  beside a ``currency``, a string such as ``"420.00 EUR"``, ``"420 eur"`` or ``"€420"``, a key that is a
  currency code (``{"eur": 420}``), or a currency code on its own (``[420, "EUR"]``: amount unknown);
- it is planned with ``moves_money: true`` (an amount on the step counts even with ``moves_money: false``:
  that flag never switches the guard off for an effect that carries an amount);
- an effect of its name has moved money before, in any workflow (``History``);
- the agent sent no plan, and its kind of workflow, or a step it says remains, has moved money before.

A value under a money key that the console cannot read (``"four hundred"``, a structure holding no
number, an input nested beyond ``MAX_DEPTH``, exponent notation such as ``"1e3 USD"``) still counts, shown
as "amount unknown": the operator is asked for the money tick either way. So does a negative amount: an
amount is never netted against another, so no total at stake can be made to cancel out. Reading is bounded
(``MAX_DEPTH``, ``MAX_NODES``) and iterative, so no input can exhaust the stack; an input too large to read
whole counts as money of unknown amount.

This module knows no model: ``Checkpoint`` asks it, passing what the trail says about earlier effects.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Protocol, TypeAlias

MAX_DEPTH = 64
MAX_NODES = 20_000
MAX_NUMBER_TEXT = 64

# A key names an amount when one of these appears anywhere in it, in any case (run together or not).
AMOUNT_PARTS = ("amount", "price", "total", "cents", "minorunit")
# ... or when one of these is a whole word of it ("fee" inside "feedback" is not one; a substring would be).
AMOUNT_WORDS = frozenset({"amt", "cost", "costs", "fee", "fees", "sum", "subtotal", "minor", "pence", "cent"})
# A key that only suggests money: a number under it counts, a word under it ("refund": "approved") does not,
# nor does a number under an identifier beside it ("transfer_id", "credit_card_last4").
MONEY_WORDS = frozenset(
    {
        "refund",
        "refunds",
        "refunded",
        "payment",
        "payments",
        "payout",
        "charge",
        "charged",
        "credit",
        "debit",
        "balance",
        "money",
        "cash",
        "paid",
        "pay",
        "deposit",
        "transfer",
        "withdrawal",
        "compensation",
        "reimbursement",
    }
)
NOT_MONEY_WORDS = frozenset(
    {
        "id",
        "ids",
        "ref",
        "reference",
        "key",
        "number",
        "no",
        "count",
        "qty",
        "quantity",
        "seq",
        "last4",
        "date",
        "days",
        "at",
        "time",
        "code",
        "status",
        "reason",
        "type",
        "method",
        "mode",
        "policy",
        "url",
        "email",
        "name",
        "note",
        "text",
    }
)
# The number of a value-and-currency pair ({"value": 420, "currency": "EUR"}, {"units": 420, "nanos": 0, …}).
VALUE_WORDS = frozenset({"value", "units", "nanos"})
# Amounts given in the currency's smallest unit.
MINOR_PARTS = ("cents", "minorunit")
MINOR_WORDS = frozenset({"minor", "pence", "cent"})
CURRENCY_WORDS = frozenset({"currency", "ccy", "iso4217"})
# ISO 4217 exponents that are not 2 (minor units per major unit: 10 ** exponent).
EXPONENTS = {
    **dict.fromkeys(
        (
            "BIF",
            "CLP",
            "DJF",
            "GNF",
            "ISK",
            "JPY",
            "KMF",
            "KRW",
            "PYG",
            "RWF",
            "UGX",
            "VND",
            "VUV",
            "XAF",
            "XOF",
            "XPF",
        ),
        0,
    ),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
}
# ISO 4217 codes (active, funds and precious metals; not XXX, "no currency"): a key or a lone string that is one
# names money; "12 pcs" or {"top": 3} in lower case are words, except where a code is all the key says.
_ISO_4217_TABLE = """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD BTN BWP BYN BZD
    CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL
    GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD
    KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR
    NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN
    SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XAG
    XAU XBA XBB XBC XBD XCD XCG XDR XOF XPD XPF XPT XSU XTS XUA YER ZAR ZMW ZWG ZWL"""
ISO_4217 = frozenset(_ISO_4217_TABLE.split())
SYMBOLS = {
    "€": "EUR",
    "$": "USD",
    "US$": "USD",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "₩": "KRW",
    "₽": "RUB",
    "₺": "TRY",
    "₪": "ILS",
    "₫": "VND",
    "฿": "THB",
    "Fr.": "CHF",
    "zł": "PLN",
}

_MARK = r"(?:[A-Za-z]{3}|US\$|Fr\.|zł|[€$£¥₹₩₽₺₪₫฿])"
_NUMBER = (
    r"[-+]?(?:\d{1,3}(?:[, ]\d{3})+(?:\.\d+)?|\d{1,3}(?:[. ]\d{3})+(?:,\d+)?|\d+(?:[.,]\d+)?)"
    r"(?P<exponent>[eE][-+]?\d+)?"  # read as an amount of unknown value: never expanded to its digits
)
# "420.00 EUR", "EUR 420.00", "€420", "1,234.56 USD", "420,00 €": a number, maybe with a currency mark.
_MONEY_TEXT = re.compile(rf"\s*(?P<pre>{_MARK})?\s?(?P<number>{_NUMBER})\s?(?P<post>{_MARK})?\s*")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
MAX_SHOWN_DIGITS = 40

# What a key says about the value under it (CODE: the value under a currency key, read as MONEY is, but a lone
# code there is the currency of its neighbours, not an amount of its own).
AMOUNT, MINOR, MONEY, VALUE, CURRENCY, CODE, NOTHING = "amount", "minor", "money", "value", "currency", "code", ""
STRONG = (AMOUNT, MINOR)  # whatever is under it is money, readable or not


@dataclass(frozen=True)
class Amount:
    """One amount found in an effect: ``value`` None when the console could not read it."""

    value: Decimal | None
    currency: str | None = None

    def __str__(self) -> str:
        if self.value is None:
            return f"amount unknown ({self.currency})" if self.currency else "amount unknown"
        number = format(self.value, "f")
        if len(number) > MAX_SHOWN_DIGITS:
            number = number[:MAX_SHOWN_DIGITS] + "…"
        return f"{number} {self.currency}" if self.currency else number


def amounts_in(data: object) -> tuple[Amount, ...]:
    """Every money-like value in ``data`` (any JSON-like shape: what is not JSON is read as no amount), in
    reading order, each once."""
    return tuple(dict.fromkeys(_walk(data)))


def carries_money(data: object) -> bool:
    return next(_walk(data), None) is not None


@dataclass(frozen=True)
class _Close:
    """Pushed under a money container's children: popped after them, it tells whether they held an amount."""

    found_before: int
    currency: str | None


def _walk(data: object) -> Iterator[Amount]:
    """Depth-first over ``data`` with an explicit stack of (value, depth, currency in scope, what its key says):
    no nesting can exhaust Python's stack, and MAX_DEPTH / MAX_NODES bound the work."""
    stack: list[tuple[object, int, str | None, str]] = [(data, 0, None, NOTHING)]
    found = nodes = 0
    while stack:
        value, depth, currency, says = stack.pop()
        if isinstance(value, _Close):
            if found == value.found_before:  # a money key or a currency with no readable amount under it
                found += 1
                yield Amount(None, value.currency)
            continue
        nodes += 1
        if depth > MAX_DEPTH or nodes > MAX_NODES:
            yield Amount(None, currency)  # too deep or too large to read whole: fail safe
            return
        if isinstance(value, Mapping):
            own = next((c for k, v in value.items() if _key_says(str(k)) == CURRENCY and (c := _currency(v))), None)
            if says in STRONG or own:
                stack.append((_Close(found, own or currency), depth, currency, says))
            for key in reversed(list(value)):
                scope = _key_code(str(key)) or own or currency  # {"eur": 420}: the key is the currency
                stack.append((value[key], depth + 1, scope, _child_says(str(key), says, bool(own))))
        elif isinstance(value, list | tuple):
            if says in STRONG:
                stack.append((_Close(found, currency), depth, currency, says))
            stack.extend((item, depth + 1, currency, says) for item in reversed(value))
        elif (amount := _read_scalar(value, currency, says)) is not None:
            found += 1
            yield amount


def _child_says(key: str, parent: str, currency_beside: bool) -> str:
    own = _key_says(key)
    if own == CURRENCY:
        return CODE  # a code ("EUR") is no amount; a number there is read as one, a structure is still read
    if parent == MINOR and own in (NOTHING, MONEY, VALUE):
        return MINOR
    if own == VALUE:
        return MONEY if currency_beside or parent in STRONG else NOTHING
    if own == NOTHING and parent in STRONG:
        return MONEY  # {"price": {"gross": 420}}: numbers inside an amount are amounts
    return own


def _read_scalar(value: object, currency: str | None, says: str) -> Amount | None:
    if value is None or isinstance(value, bool) or value == "":
        return None
    unreadable = Amount(None, currency) if says in STRONG else None
    if isinstance(value, int | float):
        if says == NOTHING:
            return None
        number = _decimal(str(value))
        return unreadable if number is None else _scaled(number, currency, says)
    if not isinstance(value, str):
        return unreadable
    text = value.strip()
    if says != CODE and text in ISO_4217:
        return Amount(None, text)  # [420, "EUR"], {"unit": "USD"}: a currency on its own, beside some amount
    match = _MONEY_TEXT.fullmatch(text) if len(text) <= MAX_NUMBER_TEXT else None
    if match is None or (match["pre"] and match["post"]):
        return unreadable
    mark = match["pre"] or match["post"]
    code = _currency(mark) if mark else currency
    if mark and code is None:
        return unreadable  # "12 pcs": a word that is no currency
    if says == NOTHING and not (mark and (mark in SYMBOLS or mark.isupper() or mark.upper() in ISO_4217)):
        return None  # free text is money only as an amount with its currency: "420.00 EUR", "420 eur", "€420"
    number = None if match["exponent"] else _decimal(match["number"])
    return Amount(None, code) if number is None else _scaled(number, code, says)


def _scaled(number: Decimal, currency: str | None, says: str) -> Amount:
    if number < 0:
        return Amount(None, currency)  # never netted against another amount: see the module's docstring
    if says != MINOR:
        return Amount(number, currency)
    exponent = EXPONENTS.get(currency or "", 2)
    try:
        return Amount(number.scaleb(-exponent).quantize(Decimal(1).scaleb(-exponent)), currency)
    except InvalidOperation:  # more digits than a Decimal holds (28): read, never raised, as amount unknown
        return Amount(None, currency)


def _decimal(text: str) -> Decimal | None:
    text = text.replace(" ", "")
    if "," in text and "." in text:
        text = text.replace(",", "") if text.rfind(".") > text.rfind(",") else text.replace(".", "").replace(",", ".")
    elif "," in text:
        text = text.replace(",", "") if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+", text) else text.replace(",", ".")
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _currency(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"[A-Za-z]{3}", text):
        return text.upper()
    return SYMBOLS.get(text)


def _key_code(key: str) -> str | None:
    """The currency a key is, when the whole key is an ISO 4217 code in any case (``"eur"``, ``"USD"``)."""
    code = key.strip().upper()
    return code if code in ISO_4217 else None


def _key_says(key: str) -> str:
    """What a key names, in any case and spelling: CURRENCY, MINOR, AMOUNT, MONEY, VALUE or NOTHING."""
    words = set(_NOT_ALNUM.split(_CAMEL.sub(r"\1_\2", key).lower())) - {""}
    joined = _NOT_ALNUM.sub("", key.lower())
    if words & CURRENCY_WORDS or joined == "cur" or joined.endswith("currency"):
        return CURRENCY
    if _key_code(key):
        return MONEY  # {"eur": 420}: a number under a currency is an amount of it; {"top": "news"} is not
    if any(p in joined for p in MINOR_PARTS) or words & MINOR_WORDS:
        return MINOR
    if any(p in joined for p in AMOUNT_PARTS) or words & AMOUNT_WORDS:
        return AMOUNT
    if words & MONEY_WORDS and not words & NOT_MONEY_WORDS:
        return MONEY
    if words & VALUE_WORDS:
        return VALUE
    return NOTHING


# --- what a resume of a checkpoint can move ---------------------------------------------------------------


class History(Protocol):
    """What the recorded trail says: which kinds of workflow and which effects have moved money before."""

    def kind_moved_money(self, kind: str) -> bool: ...

    def names_that_moved_money(self, names: Collection[str]) -> set[str]: ...


class NoHistory:
    """Knows nothing of earlier workflows: for a queue row, which must not query."""

    def kind_moved_money(self, kind: str) -> bool:
        return False

    def names_that_moved_money(self, names: Collection[str]) -> set[str]:
        return set()


# What tells one money effect from another: ("key", its idempotency key), ("seq", its step number),
# ("name", its name, its amounts) or ("plan", its place in the plan).
Identity: TypeAlias = tuple[str, str] | tuple[str, int] | tuple[str, str, tuple[Amount, ...]]

UNKNOWN_OUTCOME, PENDING, PLANNED, RERUN = "outcome unknown", "pending", "planned", "re-run by the fork"


@dataclass(frozen=True)
class MoneyEffect:
    """One effect a resume can run that moves money, and why the console thinks so.

    ``identity`` tells one effect from another: its idempotency key, else its step number, else (a plan
    step) its place in the plan. ``plan_index`` is the plan step that announces it, if one does.
    """

    name: str
    where: str  # UNKNOWN_OUTCOME, PENDING, PLANNED or RERUN
    amounts: tuple[Amount, ...]
    identity: Identity
    plan_index: int | None = None
    moved_before: bool = False  # counted (also) because an effect of its name has moved money before
    declared: bool = False  # the agent planned it with moves_money: true

    @property
    def shown_amounts(self) -> tuple[str, ...]:
        return tuple(str(a) for a in self.amounts) or ("amount unknown",)

    @property
    def reason(self) -> str:
        head = f"{self.name} is planned" if self.where == PLANNED else f"{self.name} ({self.where})"
        why = f" ({self.name} has moved money before)" if self.moved_before and not self.amounts else ""
        return f"{head}: {', '.join(self.shown_amounts)}{why}"


@dataclass(frozen=True)
class MoneyAtStake:
    """What resuming a checkpoint can move: its money effects, each once, and the reasons in words."""

    effects: tuple[MoneyEffect, ...] = ()
    unplanned: tuple[str, ...] = ()  # why money is assumed of a future the agent did not report: "… has moved
    # money before"

    def __bool__(self) -> bool:
        return bool(self.effects or self.unplanned)

    @property
    def reasons(self) -> list[str]:
        return [e.reason for e in self.effects] + [
            f"the agent did not report its plan, and {why}" for why in self.unplanned
        ]

    @property
    def amounts(self) -> list[str]:
        """What a badge shows, one per amount of each money effect ("amount unknown" where none is readable)."""
        return [shown for e in self.effects for shown in e.shown_amounts]

    @property
    def by_plan_step(self) -> dict[int, MoneyEffect]:
        """The money effect each plan step announces, by the step's index in the plan."""
        return {e.plan_index: e for e in self.effects if e.plan_index is not None}

    @classmethod
    def of(cls, resume_state: object, *, kind: str, history: History | None = None) -> MoneyAtStake:
        """Read from a checkpoint's resume state; ``history`` answers what moved money before (none: a
        reading from the resume state alone, as a queue row needs)."""
        history = history or NoHistory()
        state = resume_state if isinstance(resume_state, Mapping) else {}
        plan = state.get("plan")
        recorded, planned, remaining, unseen = _read(state)
        moved = history.names_that_moved_money(unseen) if unseen else set()
        effects = [e for e in _once(recorded, planned, moved) if e.amounts or e.declared or e.moved_before]
        unplanned = []
        if not isinstance(plan, list):
            if history.kind_moved_money(kind):
                unplanned.append(f"{kind} workflows have moved money before")
            unplanned += [f"{name} has moved money before" for name in dict.fromkeys(remaining) if name in moved]
        return cls(tuple(effects), tuple(unplanned))


def _read(state: Mapping[str, object]) -> tuple[list[MoneyEffect], list[MoneyEffect], list[str], set[str]]:
    """The recorded and planned effects of a resume state, the steps it says remain (no plan only), and the
    names whose money only the recorded trail can tell (effects seen without an amount, and those steps)."""
    plan = state.get("plan")
    recorded, planned = _recorded(state), _planned(plan) if isinstance(plan, list) else []
    remaining = [] if isinstance(plan, list) else _remaining(state)
    unseen = {e.name for e in recorded + planned if not e.amounts} | set(remaining)
    return recorded, planned, remaining, unseen


def _recorded(state: Mapping[str, object]) -> list[MoneyEffect]:
    """The unknown effects, the pending effect and the effect a fork re-runs, each once (the pending step can
    be an unknown one)."""
    unknown = state.get("unknown_effects")
    candidates = [(step, UNKNOWN_OUTCOME) for step in (unknown if isinstance(unknown, list) else [])]
    candidates.append((state.get("pending"), PENDING))
    agent_state = state.get("state")
    fork = agent_state.get("fork") if isinstance(agent_state, Mapping) else None
    if isinstance(fork, Mapping):  # a fork re-runs its first step with the input the operator gave it
        candidates.append(
            (
                {
                    "name": fork.get("step"),
                    "kind": fork.get("kind"),
                    "input": fork.get("input"),
                    "idempotency_key": f"fork:{fork.get('from_workflow_id')}:{fork.get('from_seq')}",
                },
                RERUN,
            )
        )
    effects: dict[Identity, MoneyEffect] = {}
    for step, where in candidates:
        if isinstance(step, Mapping) and step.get("kind") == "effect":
            amounts = amounts_in(step.get("input"))
            identity = _identity(step, amounts)
            effects.setdefault(identity, MoneyEffect(str(step.get("name")), where, amounts, identity))
    return list(effects.values())


def _identity(step: Mapping[str, object], amounts: tuple[Amount, ...]) -> Identity:
    if key := step.get("idempotency_key"):
        return ("key", str(key))
    if isinstance(seq := step.get("seq"), int):
        return ("seq", seq)
    return ("name", str(step.get("name")), amounts)


def _planned(plan: list[object]) -> list[MoneyEffect]:
    """The plan's effects, and any plan step that carries an amount or says it moves money."""
    effects = []
    for index, step in enumerate(plan[:1000]):
        if not isinstance(step, Mapping):
            continue
        amounts = amounts_in({k: v for k, v in step.items() if k not in ("name", "kind", "moves_money")})
        if step.get("kind") == "effect" or amounts or step.get("moves_money"):
            effects.append(
                MoneyEffect(
                    str(step.get("name")),
                    PLANNED,
                    amounts,
                    ("plan", index),
                    plan_index=index,
                    declared=bool(step.get("moves_money")),
                )
            )
    return effects


def _remaining(state: Mapping[str, object]) -> list[str]:
    agent_state = state.get("state")
    remaining = agent_state.get("remaining") if isinstance(agent_state, Mapping) else None
    return [str(r) for r in remaining[:200] if isinstance(r, str | int)] if isinstance(remaining, list) else []


def _once(recorded: list[MoneyEffect], planned: list[MoneyEffect], moved: set[str]) -> list[MoneyEffect]:
    """Every effect once. A plan step that repeats a recorded (pending or unknown) effect is that effect, not a
    second one: same name, and the same amounts or none on one side. Each recorded effect takes one plan step;
    two like steps in the plan stay two (they are two refunds)."""
    effects = [replace(e, moved_before=e.name in moved) for e in recorded]
    for step in planned:
        twin = next(
            (
                i
                for i, e in enumerate(effects)
                if e.identity[0] != "plan"
                and e.plan_index is None
                and e.name == step.name
                and (e.amounts == step.amounts or not e.amounts or not step.amounts)
            ),
            None,
        )
        if twin is None:
            effects.append(replace(step, moved_before=step.name in moved))
        else:
            kept = effects[twin]
            effects[twin] = replace(
                kept,
                amounts=kept.amounts or step.amounts,
                plan_index=step.plan_index,
                declared=kept.declared or step.declared,
            )
    return effects


STAGES = ("committed", "pending", "planned")


def amounts_by_stage(resume_state: object, *, kind: str) -> dict[str, list[Amount]]:
    """The amounts of a resume state by stage: committed (effects done), pending (unknown, pending or re-run
    effects) and planned (the agent's plan); "amount unknown" for a money effect whose amount cannot be read.
    The blast radius adds these up, and a rollout's money gate confirms their pending and planned total."""
    state = resume_state if isinstance(resume_state, Mapping) else {}
    staged: dict[str, list[Amount]] = {stage: [] for stage in STAGES}
    for step in state.get("committed") or []:
        if isinstance(step, Mapping):
            staged["committed"] += amounts_in(step.get("input"))
    for effect in MoneyAtStake.of(state, kind=kind).effects:
        stage = "planned" if effect.where == PLANNED else "pending"
        staged[stage] += effect.amounts or (Amount(None),)
    return staged


def unseen_effect_names(resume_state: Mapping[str, object]) -> set[str]:
    """The names of the effects a resume state records without an amount, and of the steps it says remain:
    what only the recorded money history can judge (``MoneyAtStake.of`` with a history)."""
    return _read(resume_state)[3]
