"""The demo's simulated external systems: persistent ledgers that record every execution, and faults."""

import functools
from decimal import Decimal

import pytest

from demo.systems import Fault, Ledgers, RateLimited, ServiceError, SystemTimeout
from tests.helpers import run_together


@pytest.fixture
def ledgers(tmp_path):
    return Ledgers(tmp_path / "ledgers.sqlite3")


def refund(ledgers, key="T-1042:refund", fault=None, amount="42.00"):
    return ledgers.payments.refund(
        key, ticket="T-1042", amount=amount, currency="EUR", agent="support-bot", fault=fault
    )


def test_the_ledgers_live_under_var_dir_demo_by_default(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    ledgers = Ledgers()
    assert ledgers.path == tmp_path / "demo" / "ledgers.sqlite3"
    assert ledgers.path.exists()


def test_every_execution_is_recorded_with_its_key_and_survives_a_new_process(ledgers):
    ref = refund(ledgers)
    note = ledgers.tickets.add_note("T-1042:note", ticket="T-1042", text="Refunded.")
    message = ledgers.messaging.send("T-1042:message", ticket="T-1042", to="ada@example.com", text="Done.")

    reopened = Ledgers(ledgers.path)  # another process opening the same file
    [execution] = reopened.executions_for("T-1042:refund")
    assert (execution.ref, execution.amount, execution.currency, execution.agent) == (
        ref,
        "42.00",
        "EUR",
        "support-bot",
    )
    assert ref.startswith("R-") and note.startswith("N-") and message.startswith("M-")
    assert reopened.executions_for("T-1042:message")[0].body == "To ada@example.com: Done."


def test_the_systems_do_not_dedupe_so_a_repeated_refund_shows_as_a_duplicate(ledgers):
    first, second = refund(ledgers), refund(ledgers)
    assert first != second
    assert len(ledgers.executions_for("T-1042:refund")) == 2
    assert ledgers.duplicates() == {"T-1042:refund": 2}


def test_a_timeout_after_the_commit_hides_a_refund_that_really_happened(ledgers):
    with pytest.raises(SystemTimeout) as after:
        refund(ledgers, fault=Fault.TIMEOUT_AFTER_COMMIT)
    assert len(ledgers.executions_for("T-1042:refund")) == 1
    assert ledgers.payments.lookup("T-1042:refund") == ledgers.executions_for("T-1042:refund")[0].ref

    with pytest.raises(SystemTimeout) as before:
        refund(ledgers, key="T-1043:refund", fault=Fault.TIMEOUT_BEFORE_COMMIT)
    assert ledgers.executions_for("T-1043:refund") == []
    assert ledgers.payments.lookup("T-1043:refund") is None
    assert str(after.value) == str(before.value)  # the caller cannot tell the two apart


def test_garbage_is_answered_after_committing(ledgers):
    answer = refund(ledgers, fault=Fault.GARBAGE)
    [execution] = ledgers.executions_for("T-1042:refund")
    assert answer != execution.ref and not answer.startswith("R-")


@pytest.mark.parametrize(("fault", "error"), [(Fault.RATE_LIMIT, RateLimited), (Fault.ERROR, ServiceError)])
def test_a_rate_limit_or_an_error_executes_nothing(ledgers, fault, error):
    with pytest.raises(error):
        refund(ledgers, fault=fault)
    with pytest.raises(error):
        ledgers.tickets.read("T-1042", fault=fault)
    assert ledgers.totals()["executions"] == 0


def test_a_ticket_read_is_stable_or_garbage_when_told(ledgers):
    ticket = ledgers.tickets.read("T-1042")
    assert ticket == ledgers.tickets.read("T-1042")
    assert {"ticket", "customer", "email", "subject", "amount", "currency"} <= set(ticket)
    assert not isinstance(ledgers.tickets.read("T-1042", fault=Fault.GARBAGE), dict)
    with pytest.raises(SystemTimeout):
        ledgers.tickets.read("T-1042", fault=Fault.TIMEOUT_BEFORE_COMMIT)
    assert ledgers.totals()["executions"] == 0  # reads are not executions


def test_totals_count_operations_money_and_duplicated_keys(ledgers):
    refund(ledgers, amount="10.50")
    refund(ledgers, amount="10.50")
    refund(ledgers, key="T-7:refund", amount="1.25")
    ledgers.tickets.add_note("T-7:note", ticket="T-7", text="x")
    totals = ledgers.totals()
    assert totals["by_operation"] == {"refund": 3, "note": 1}
    assert Decimal(totals["money"]["EUR"]) == Decimal("22.25")
    assert totals["duplicate_keys"] == 1 and totals["executions"] == 4


def test_concurrent_writers_from_many_threads_lose_nothing(ledgers):
    def work(n):
        for i in range(10):
            ledgers.tickets.add_note(f"T-{n}-{i}:note", ticket=f"T-{n}", text="concurrent")

    run_together([functools.partial(work, n) for n in range(8)])
    assert ledgers.totals()["executions"] == 80
    assert ledgers.duplicates() == {}


def test_recent_finds_an_execution_by_key_reference_or_ticket(ledgers):
    ref = refund(ledgers)
    refund(ledgers, key="T-9:refund")
    assert [e.ref for e in ledgers.recent(search="T-1042:refund")] == [ref]
    assert [e.ref for e in ledgers.recent(search=ref)] == [ref]
    assert len(ledgers.recent()) == 2
