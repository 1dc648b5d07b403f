"""Which runbook a checkpoint gets: the most specific one whose rules (kind, reason, agent) all match;
the admin's priority breaks ties; the default takes what nothing else matches."""

from django.urls import reverse

from tests.helpers import (
    make_agent,
    make_checkpoint,
    make_runbook,
    make_worked_example,
    make_workflow,
    squeezed,
)
from workflows.models import Runbook


def slug_for(kind="refund", reason="model_timeout", agent=None):
    found = Runbook.match(kind, reason, agent)
    return found.slug if found else None


def test_every_rule_must_match_and_the_most_specific_wins(db):
    bot, _ = make_agent("refund-bot")
    other, _ = make_agent("other-bot")
    make_runbook(slug="default", is_default=True)
    make_runbook(slug="timeouts", reason="model_timeout")
    make_runbook(slug="refunds", workflow_kind="refund")
    make_runbook(slug="refunds-timeouts", workflow_kind="refund", reason="model_timeout")
    make_runbook(slug="bot-refunds-timeouts", workflow_kind="refund", reason="model_timeout", agent=bot)
    assert slug_for(agent=bot) == "bot-refunds-timeouts"
    assert slug_for(agent=other) == "refunds-timeouts"  # the agent rule does not match another agent
    assert slug_for() == "refunds-timeouts"  # no agent known: agent-specific runbooks are out
    assert slug_for(reason="tool_error", agent=bot) == "refunds"
    assert slug_for(kind="billing", agent=bot) == "timeouts"
    assert slug_for(kind="billing", reason="tool_error", agent=bot) == "default"


def test_an_agent_rule_alone_beats_nothing_but_loses_to_two_rules(db):
    bot, _ = make_agent("refund-bot")
    make_runbook(slug="bot", agent=bot)
    make_runbook(slug="refunds-timeouts", workflow_kind="refund", reason="model_timeout")
    assert slug_for(agent=bot) == "refunds-timeouts"
    assert slug_for(reason="rate_limit", agent=bot) == "bot"


def test_priority_breaks_a_tie_between_equally_specific_runbooks_whatever_the_rule(db):
    bot, _ = make_agent("refund-bot")
    make_runbook(slug="a-timeouts", reason="model_timeout")
    make_runbook(slug="b-refunds", workflow_kind="refund")
    make_runbook(slug="c-bot", agent=bot)
    assert slug_for(agent=bot) == "c-bot"  # equal priorities: agent, then kind, then reason
    timeouts = Runbook.objects.get(slug="a-timeouts")
    timeouts.priority = 10
    timeouts.save()
    assert slug_for(agent=bot) == "a-timeouts"
    refunds = Runbook.objects.get(slug="b-refunds")
    refunds.priority = 11
    refunds.save()
    assert slug_for(agent=bot) == "b-refunds"


def test_priority_never_lets_a_less_specific_runbook_win(db):
    make_runbook(slug="everything", priority=100)
    make_runbook(slug="refunds", workflow_kind="refund")
    assert slug_for() == "refunds"
    assert slug_for(kind="billing") == "everything"


def test_the_default_comes_last_even_with_a_higher_priority(db):
    make_runbook(slug="default", is_default=True, priority=99)
    make_runbook(slug="anything", priority=-5)
    assert slug_for() == "anything"


def test_a_checkpoint_gets_the_runbook_of_its_workflows_agent(db):
    bot, _ = make_agent("refund-bot")
    make_runbook(slug="refunds", workflow_kind="refund")
    make_runbook(slug="bot-refunds", workflow_kind="refund", agent=bot)
    assert make_checkpoint(make_worked_example(agent=bot)).runbook.slug == "bot-refunds"
    assert make_checkpoint(make_worked_example()).runbook.slug == "refunds"
    assert make_checkpoint(make_workflow(kind="billing")).runbook is None


def test_the_preview_takes_an_agent_and_shows_the_version_and_what_it_beat(client, adam):
    bot, _ = make_agent("refund-bot")
    make_runbook(slug="refunds", title="Refunds", workflow_kind="refund")
    special = make_runbook(slug="bot-refunds", title="Refund bot <i>special</i>", workflow_kind="refund", agent=bot)
    special.body = "edited"
    special.save()
    client.force_login(adam)
    page = squeezed(
        client.get(
            reverse("runbook_preview"), {"kind": "refund", "reason": "tool_error", "agent": "refund-bot"}
        ).content.decode()
    )
    assert "Refund bot &lt;i&gt;special&lt;/i&gt;" in page
    assert 'data-testid="preview-version"' in page and "version 2" in page
    assert "it beats Refunds" in page
    plain = client.get(reverse("runbook_preview"), {"kind": "refund", "reason": "tool_error"}).content.decode()
    assert "<strong>Refunds</strong>" in plain and "special" not in plain.split('data-testid="preview-result"')[1]
    unknown = client.get(reverse("runbook_preview"), {"kind": "refund", "reason": "tool_error", "agent": "nobody"})
    assert unknown.status_code == 200 and 'data-testid="preview-result"' not in unknown.content.decode()


def test_the_one_query_matcher_picks_what_match_picks_for_every_kind_and_reason(db, django_assert_num_queries):
    import random

    seed = 2026
    print(f"seed {seed}")
    rng = random.Random(seed)
    bot, _ = make_agent("refund-bot")
    kinds, reasons = ["refund", "billing", "dispute"], ["model_timeout", "tool_error", "rate_limited"]
    make_runbook(slug="default", is_default=True)
    for n in range(12):
        make_runbook(
            slug=f"rb-{n}",
            workflow_kind=rng.choice(["", *kinds]),
            reason=rng.choice(["", *reasons]),
            agent=rng.choice([None, bot]),
            priority=rng.randrange(3),
        )
    with django_assert_num_queries(1):
        match = Runbook.matcher()
        picked = {(k, r): match(k, r) for k in [*kinds, "other"] for r in [*reasons, "manual"]}
    assert {pair: Runbook.match(*pair) for pair in picked} == picked
    assert len({runbook.slug for runbook in picked.values()}) > 3  # the rules really differ across pairs
