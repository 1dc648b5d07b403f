"""One keyset pager pages the queue (soonest due first) and the breach review (newest breach first)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from console.keyset import KeysetPager
from tests.helpers import make_checkpoint
from workflows.models import Checkpoint


def walk(pager: KeysetPager, qs, size: int) -> list[int]:
    """Every row, page after page through the next cursors (a pager that never ends fails, not hangs)."""
    seen: list[int] = []
    after = None
    for _ in range(qs.count() + 1):
        page = pager.page(qs, size=size, after=after)
        seen += [c.pk for c in page.rows]
        if not page.has_next:
            return seen
        after = pager.cursor(page.rows[-1])
    raise AssertionError(f"more pages than rows: {seen}")


@pytest.fixture
def stamped(db):
    """Checkpoints with due and breach times that tie (same microsecond) and differ by one microsecond."""
    seed = 2112
    print(f"seed={seed}")
    rng = random.Random(seed)
    base = timezone.now().replace(microsecond=123456)
    for _ in range(23):
        c = make_checkpoint()
        at = base + timedelta(microseconds=rng.choice([0, 0, 1, 2, 7]), seconds=rng.randint(0, 3))
        Checkpoint.objects.filter(pk=c.pk).update(due_at=at, breached_at=at)
    return Checkpoint.objects.all()


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("size", [1, 4, 23, 50])
def test_walking_every_page_lists_each_row_once_in_order_ties_included(stamped, descending, size):
    field = "breached_at" if descending else "due_at"
    pager = KeysetPager(field, descending=descending)
    expected = list(
        stamped.order_by(*((f"-{field}", "-pk") if descending else (field, "pk"))).values_list("pk", flat=True)
    )
    assert walk(pager, stamped, size) == expected


@pytest.mark.parametrize("descending", [False, True])
def test_before_a_cursor_is_the_page_that_ends_just_before_it(stamped, descending):
    pager = KeysetPager("due_at", descending=descending)
    ordered = walk(pager, stamped, 50)
    row = stamped.get(pk=ordered[10])
    page = pager.page(stamped, size=4, before=pager.cursor(row))
    assert [c.pk for c in page.rows] == ordered[6:10] and page.has_prev and page.has_next
    first = pager.page(stamped, size=4, before=pager.cursor(stamped.get(pk=ordered[3])))
    assert [c.pk for c in first.rows] == ordered[:3] and not first.has_prev


@pytest.mark.parametrize("nonsense", ["", "nonsense", "1.x", "1.2.3", "9" * 40 + ".1", ".", None])
def test_a_cursor_that_names_no_row_gives_the_first_page(stamped, nonsense):
    pager = KeysetPager("due_at")
    first = pager.page(stamped, size=5)
    page = pager.page(stamped, size=5, after=nonsense, before=nonsense)
    assert [c.pk for c in page.rows] == [c.pk for c in first.rows] and not page.has_prev


def test_the_cursor_is_exact_to_the_microsecond_and_refuses_a_row_without_the_value(db):
    c = make_checkpoint()
    pager = KeysetPager("breached_at", descending=True)
    with pytest.raises(ValueError, match="no breached_at"):
        pager.cursor(c)
    c.breached_at = timezone.now().replace(microsecond=999999)
    assert pager.parse(pager.cursor(c)) == (c.breached_at, c.pk)
