"""The navigation search finds a workflow by the ticket a customer quotes, its title, its agent or its id."""

from __future__ import annotations

from django.urls import reverse

from tests.helpers import make_agent, make_workflow


def test_the_ticket_id_a_customer_quotes_opens_its_workflow(client, alice):
    workflow = make_workflow(external_id="T-4242")
    make_workflow(external_id="T-42420")  # a longer id that contains it does not get in the way
    client.force_login(alice)

    response = client.get(reverse("search"), {"q": " t-4242 "})

    assert response.status_code == 302 and response["Location"] == reverse("workflow", args=[workflow.pk])


def test_a_title_word_lists_every_match(client, alice):
    a = make_workflow(title="Refund for a broken kettle")
    b = make_workflow(title="Kettle arrived late")
    make_workflow(title="Something else")
    client.force_login(alice)

    html = client.get(reverse("search"), {"q": "kettle"}).content.decode()

    assert html.count('data-testid="search-result"') == 2
    assert reverse("workflow", args=[a.pk]) in html and reverse("workflow", args=[b.pk]) in html
    assert 'value="kettle"' in html  # the box keeps what was typed


def test_an_agent_name_and_an_id_find_workflows(client, alice):
    agent, _ = make_agent("billing-bot")
    first, second = make_workflow(agent), make_workflow(agent)
    make_workflow()
    client.force_login(alice)

    html = client.get(reverse("search"), {"q": "billing-bot"}).content.decode()
    assert html.count('data-testid="search-result"') == 2
    response = client.get(reverse("search"), {"q": str(second.pk)})
    assert response["Location"] == reverse("workflow", args=[second.pk])
    assert first.pk != second.pk


def test_an_id_opens_its_workflow_even_when_other_tickets_contain_the_number(client, alice):
    wanted = make_workflow()
    make_workflow(external_id=f"T-{wanted.pk}0", title=f"Refund {wanted.pk}")  # the id, in part
    client.force_login(alice)

    response = client.get(reverse("search"), {"q": str(wanted.pk)})

    assert response.status_code == 302 and response["Location"] == reverse("workflow", args=[wanted.pk])


def test_a_ticket_named_like_an_id_wins_over_the_id(client, alice):
    numbered = make_workflow()
    quoted = make_workflow(external_id=str(numbered.pk))  # a customer's ticket number that is also an id
    client.force_login(alice)

    response = client.get(reverse("search"), {"q": str(numbered.pk)})

    assert response["Location"] == reverse("workflow", args=[quoted.pk])


def test_nothing_found_says_where_it_looked_and_escapes_the_query(client, alice):
    client.force_login(alice)

    html = client.get(reverse("search"), {"q": "<script>x</script>"}).content.decode()

    assert "No workflow matches" in html and "<script>x</script>" not in html
    assert client.get(reverse("search"), {"q": "9" * 40}).status_code == 200  # beyond any id: no error


def test_hash_id_as_the_placeholder_writes_it_opens_the_workflow(client, alice):
    """Issue 28 item 5: the box says "#id", the README says `#id`: "#19" answered "No workflow matches"."""
    workflow = make_workflow(external_id="INV-77")
    client.force_login(alice)

    for typed in (f"#{workflow.pk}", f" # {workflow.pk} ", str(workflow.pk)):
        response = client.get(reverse("search"), {"q": typed})
        assert response.status_code == 302 and response["Location"] == reverse("workflow", args=[workflow.pk]), typed


def test_a_hash_that_names_no_workflow_says_so_and_odd_digits_are_no_500(client, alice):
    make_workflow()
    client.force_login(alice)

    for typed in ("#999999", "#²", "#99999999999999999999", "#"):
        response = client.get(reverse("search"), {"q": typed})
        assert response.status_code == 200 and "No workflow matches" in response.content.decode(), typed
