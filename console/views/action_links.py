"""The page an email action link opens: GET shows what the link would do, POST (signed in as its
recipient, once, before it expires) does it through the domain's methods, via the email channel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core import signing
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from workflows.models import Checkpoint, Decider, Decision
from workflows.models.action_links import APPROVE, CLAIM, REJECT, ActionLink, ActionLinkUse
from workflows.via import Via, acting_via

from ..roles import operator_required, signed_in

if TYPE_CHECKING:
    from workflows.models.base import Operator

WHAT = {CLAIM: "Claim this checkpoint", APPROVE: "Approve the proposal", REJECT: "Reject the proposal"}


@operator_required
@require_http_methods(["GET", "POST"])
def action_link(request: HttpRequest, token: str) -> HttpResponse:
    user = signed_in(request)
    try:
        link = ActionLink.read(token)
    except signing.SignatureExpired:
        return _page(request, 410, error="This link has expired. Open the checkpoint in the console instead.")
    except signing.BadSignature:
        return _page(request, 400, error="This link is not valid.")
    checkpoint = Checkpoint.objects.for_workbench().filter(pk=link.checkpoint_id).first()
    if checkpoint is None:
        return _page(request, 404, error="That checkpoint no longer exists.")
    context: dict[str, object] = {"checkpoint": checkpoint, "what": WHAT[link.action]}
    if link.user_id != user.pk:
        return _page(request, 403, error="This link was sent to someone else: it acts only for them.", **context)
    if link.was_used():
        return _page(request, 410, error="This link was used already: each link acts once.", **context)
    if request.method == "GET":
        return _page(request, 200, **context)
    try:
        with transaction.atomic(), acting_via(Via.EMAIL):
            ActionLinkUse.objects.create(nonce=link.nonce, user=user, checkpoint=checkpoint, action=link.action)
            outcome = _carry_out(link, checkpoint, user)
            ActionLinkUse.objects.filter(nonce=link.nonce).update(outcome=outcome[:300])
    except IntegrityError:
        return _page(request, 410, error="This link was used already: each link acts once.", **context)
    return _page(request, 200, done=outcome, **context)


def _carry_out(link: ActionLink, checkpoint: Checkpoint, user: Operator) -> str:
    """The same calls as the workbench's buttons; what happened, in words."""
    if link.action == CLAIM:
        return (
            "Claimed: it is yours."
            if checkpoint.claim(by=user)
            else f"Not claimed: {Decider(checkpoint).conflict_message()}"
        )
    decision = Decision.objects.filter(pk=link.decision_id or 0, checkpoint=checkpoint).first()
    if decision is None:
        return "That proposal no longer exists."
    if link.action == APPROVE:
        done = decision.approve(by=user)
        return "Approved: the decision is queued for delivery." if done else decision.refusal(by=user)
    done = decision.reject(by=user, note="Rejected from an email link.")
    return (
        f"Rejected: the checkpoint is back with {decision.decided_by.get_username()}."
        if done
        else decision.refusal(by=user)
    )


def _page(request: HttpRequest, status: int, **context: object) -> HttpResponse:
    return render(request, "console/action_link.html", context, status=status)
