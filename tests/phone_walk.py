"""Every page of the URLconf, as the paths one role may open: what the 390 px walk visits.

The routes come from ``access.rules.url_rules`` (the same walk as tests/test_access_rules.py), never
from a hand list. A route's parameters are filled from real objects: ``FILL`` says, per console URL
name, which object of ``objects`` stands behind each parameter; the Django admin's routes take the
first object of their ModelAdmin's model. A console route with parameters and no entry in ``FILL``
is visited with every parameter ``1``: an action (POST only) answers 405 and is skipped, a page
answers 404 and the walk fails, saying to add it here (and to make the data it needs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from access.rules import ADMIN_SITE, url_rules

Objects = dict[str, Any]  # "checkpoint", "workflow", "replay", "runbook", "incident", "drill"

FILL: dict[str, Callable[[Objects], dict[str, Any]]] = {
    "workbench": lambda o: {"pk": o["checkpoint"].pk},
    "workflow": lambda o: {"pk": o["workflow"].pk},
    "replay": lambda o: {"pk": o["replay"].pk},
    "runbook": lambda o: {"pk": o["runbook"].pk},
    "runbook_edit": lambda o: {"pk": o["runbook"].pk},
    "runbook_diff": lambda o: {"pk": o["runbook"].pk},
    "runbook_version": lambda o: {
        "pk": o["runbook"].pk,
        "number": o["runbook"].versions.order_by("-number").first().number,
    },
    "resume_export": lambda o: {"table": "headline"},  # a CSV: measured only if it ever answers HTML
    "incident": lambda o: {"pk": o["incident"].pk},
    "drill_report": lambda o: {"pk": o["drill"].pk},
    "incident_postmortem": lambda o: {"pk": o["incident"].pk},
    "evidence": lambda o: {"pk": o["incident"].pk},
    "evidence_preview": lambda o: {"pk": o["evidence"].pk},  # Markdown: measured only if it ever answers HTML
}
# logout: POST only (405) anyway, and a GET that signed out would end the walk. The single sign-on URLs are
# redirects to the identity provider and back (404 while it is not configured), not pages. incident_rows is
# the queue's polled fragment (bare table rows): the walk measures it where it is shown, on the queue.
SKIPPED = ("logout", "oidc_authentication_init", "oidc_callback", "oidc_backchannel_logout", "incident_rows")


def _fill(route: str, values: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        return str(values.get(match.group("name"), 1))

    # Regex routes of the admin first: ^(?P<app_label>auth|workflows)/$ -> the first choice
    path = re.sub(r"\(\?P<\w+>([^)]*)\)", lambda m: m.group(1).split("|")[0], route)
    path = re.sub(r"<(?:\w+:)?(?P<name>\w+)>", value, path)
    return "/" + path.replace("^", "").replace("$", "")


def _admin_values(view: Any, objects: Objects) -> dict[str, Any] | None:
    from django.contrib.contenttypes.models import ContentType

    # A changelist or change view names its ModelAdmin; a ModelAdmin's own extra views (the user's
    # password form) are its bound methods behind admin_view's wrapper.
    model_admin = getattr(view, "model_admin", None) or getattr(getattr(view, "__wrapped__", None), "__self__", None)
    if model_admin is not None and hasattr(model_admin, "model"):
        first = model_admin.model._default_manager.order_by("pk").first()
        return {"object_id": first.pk if first is not None else 1, "id": first.pk if first is not None else 1}
    checkpoint = objects["checkpoint"]
    return {"content_type_id": ContentType.objects.get_for_model(checkpoint).pk, "object_id": checkpoint.pk}


def pages(principal: str, objects: Objects) -> Iterator[tuple[str, str]]:
    """(path, URL name) of every route the role may open, its parameters filled from ``objects``."""
    for route, name, view, rule in url_rules():
        if rule is None or not rule.allows(principal) or name.split(":")[-1] in SKIPPED:
            continue
        if name.startswith("api:") or route.startswith(("api/", "healthz", "metrics")):
            continue  # machines' endpoints (JSON, text), not pages
        if rule is ADMIN_SITE or name.startswith("admin:"):
            if ".*" in route:
                continue  # the admin's catch-all: a 404 for any path the others do not take
            values = _admin_values(view, objects) or {}
        else:
            short = name.split(":")[-1]
            values = FILL[short](objects) if short in FILL else {}
        yield _fill(route, values), name


# Words a browser broke across two lines (“notify_custome r”, “12/1 2”) under the elements ``selector`` finds:
# each word of every text node there, measured on its own; a word wrapped whole onto the next line is fine, and
# so is a line ending after a hyphen or a slash ("support-" / "bot").
BROKEN_WORDS = """selector => {
  const broken = [];
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement.checkVisibility()) continue;  // in a closed <details>: laid out, not shown
      for (const match of node.data.matchAll(/[^\\s\\/-]+[\\/-]?/g)) {  // a line may end after "-" or "/"
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""


# What sticks out past the window: the outermost elements whose right edge passes it, for a failure message.
CULPRITS = """() => [...document.querySelectorAll("body *")]
    .filter(el => el.getBoundingClientRect().right > innerWidth + 1
                  && el.parentElement.getBoundingClientRect().right <= innerWidth + 1).slice(0, 5)
    .map(el => `${el.tagName.toLowerCase()}.${[...el.classList].join(".")}`
               + ` to ${Math.round(el.getBoundingClientRect().right)} px`)"""
