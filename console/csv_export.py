"""The one CSV exporter: every CSV the console serves (the resume dashboard's tables, the breach
review, the admin's audit trail) is streamed by ``stream_csv``, and every cell of it, header
included, goes through the one formula guard ``safe_cell``.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, in some, a tab or a
line break before them) as a formula, and agent text (a title, a kind, a name) reaches these files:
such a cell is exported with a leading apostrophe, which spreadsheets show as text. The guard is
applied to every cell rather than to the columns thought to carry agent text: usernames, runbook
slugs and agent names may start with ``-`` or ``@`` too (tests/test_csv_exports.py).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeAlias

from django.http import StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")

Cell: TypeAlias = str | int | float | None  # what a CSV cell is written from (None: empty)


def safe_cell(value: Cell) -> Cell:
    """The value as a spreadsheet will take it as text: a string starting like a formula gets a leading '."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[Sequence[Cell]]) -> Iterator[str]:
    """Each row (the header first) as one CSV line, every cell guarded."""
    writer = csv.writer(_Echo())
    for row in rows:
        yield writer.writerow([safe_cell(value) for value in row])


def stream_csv(rows: Iterable[Sequence[Cell]], filename: str) -> StreamingHttpResponse:
    """A streamed CSV download of ``rows`` (the header first)."""
    response = StreamingHttpResponse(csv_lines(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response
