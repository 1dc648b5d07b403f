"""The resume state in plain language: what is committed, what is unknown, what is still to do (with the
money at stake) and what the agent promised, as the workbench and the queue's review rows show it."""

from __future__ import annotations

import re
from typing import TypedDict

from workflows.money import amounts_in
from workflows.shapes import Json, JsonObject

MAX_ITEM_CHARS = 200

# Enough irregular and common verbs to read an agent's step names as English.
PARTICIPLES = {
    "write": "written",
    "send": "sent",
    "pay": "paid",
    "make": "made",
    "do": "done",
    "run": "run",
    "get": "got",
    "set": "set",
    "put": "put",
    "read": "read",
    "notify": "notified",
    "reply": "replied",
    "cancel": "cancelled",
    "email": "emailed",
}


class SummaryItem(TypedDict):
    """One item of the summary. ``kind``: committed, unknown, todo, todo-money or promise."""

    kind: str
    text: str


def _words(name: Json) -> tuple[str | None, str]:
    """'write_ticket_note' -> ('write', 'ticket note'); a single word has no verb."""
    parts = [p for p in re.split(r"[_\-\s.:/]+", str(name).strip()) if p]
    if len(parts) < 2:
        return None, " ".join(parts)
    return parts[0].lower(), " ".join(parts[1:])


def _participle(verb: str) -> str:
    if verb in PARTICIPLES:
        return PARTICIPLES[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def amounts(step: Json) -> list[str]:
    """The amounts a recorded effect (in its input) or a planned step (on itself) carries, by the money rule
    (workflows.money: any key spelling, nesting or minor units), as "420.00 EUR"."""
    if not isinstance(step, dict):
        return []
    data = (
        step.get("input")
        if "input" in step
        else {k: v for k, v in step.items() if k not in ("name", "kind", "moves_money")}
    )
    return [str(a) for a in amounts_in(data)]


def _money(effect: JsonObject) -> str:
    """' of 42.00 EUR' for a recorded effect (amount in its input) or a planned one (amount on the step)."""
    found = amounts(effect)
    return f" of {', '.join(found)}" if found else ""


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "…"


def _not_done(name: str, money: str = "") -> str:
    verb, thing = _words(name)
    return f"{thing}{money} not {_participle(verb)}" if verb else f"{thing}{money} not done"


def resume_summary(resume_state: Json) -> list[SummaryItem]:
    """The resume state in one line of plain language, as (kind, text) items.

    Kinds: committed, unknown, todo, promise. Built only from what the agent
    sent, so every text is escaped by the template like any other agent data.
    """
    if not isinstance(resume_state, dict):
        return []
    items: list[SummaryItem] = []
    done_names = set()
    for effect in _dicts(resume_state.get("committed")):
        if effect.get("kind") != "effect":
            continue
        done_names.add(str(effect.get("name")))
        verb, thing = _words(effect.get("name"))
        ref = f" {effect['external_ref']}" if effect.get("external_ref") else ""
        items.append({"kind": "committed", "text": f"{thing}{ref}{_money(effect)} committed"})
    for effect in _dicts(resume_state.get("unknown_effects")):
        done_names.add(str(effect.get("name")))
        _verb, thing = _words(effect.get("name"))
        items.append({"kind": "unknown", "text": f"{thing}{_money(effect)}: outcome unknown"})
    state = resume_state.get("state")
    remaining = state.get("remaining") if isinstance(state, dict) else None
    plan = resume_state.get("plan")
    if isinstance(plan, list):  # the agent's own account of what is left, with the money at stake
        todo = [
            (str(s.get("name")), _money(s))
            for s in _dicts(plan)
            if s.get("kind") in ("effect", "message") and str(s.get("name")) not in done_names
        ][:20]
    elif isinstance(remaining, list):
        todo = [(str(r), "") for r in remaining if isinstance(r, str | int) and str(r) not in done_names][:20]
    else:
        pending = resume_state.get("pending")
        todo = [(str(pending["name"]), "")] if isinstance(pending, dict) and pending.get("name") else []
    items += [{"kind": "todo-money" if money else "todo", "text": _not_done(name, money)} for name, money in todo]
    promises = resume_state.get("promises")
    for promise in (promises if isinstance(promises, list) else [])[:20]:
        items.append({"kind": "promise", "text": f"promised: {promise}"})
    for item in items:
        item["text"] = _clip(item["text"])
    if items:
        items[0]["text"] = items[0]["text"][:1].upper() + items[0]["text"][1:]
    return items


def _dicts(value: Json) -> list[JsonObject]:
    return [v for v in value if isinstance(v, dict)][:50] if isinstance(value, list) else []
