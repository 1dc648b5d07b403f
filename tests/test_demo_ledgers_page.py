"""The fleet's /ledgers page shows what really happened, with every agent-supplied string escaped."""

import urllib.parse
import urllib.request

import pytest

from demo.journal import Journal
from demo.server import ResumeServer
from demo.systems import Ledgers

HOSTILE = "<script>alert('x')</script>"


@pytest.fixture
def server(tmp_path):
    server = ResumeServer(
        {}, journal=Journal(tmp_path / "runtime.sqlite3"), ledgers=Ledgers(tmp_path / "ledgers.sqlite3"), port=0
    )
    server.start()
    yield server
    server.stop()


def get(server, path):
    with urllib.request.urlopen(server.url(path), timeout=5) as response:
        return response.status, response.headers, response.read().decode()


def test_the_page_escapes_agent_text_and_flags_duplicated_keys(server):
    ledgers = server.ledgers
    for _ in range(2):
        ledgers.payments.refund("T-1042:refund", ticket="T-1042", amount="42.00", currency="EUR", agent=HOSTILE)
    ledgers.tickets.add_note(f"T-1:{HOSTILE}", ticket="T-1", text=HOSTILE)

    status, headers, html = get(server, "/ledgers")

    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert HOSTILE not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "<code>T-1042:refund</code> × 2" in html
    assert html.count("<tr class=dup>") == 2
    assert "default-src 'none'" in headers["Content-Security-Policy"]


def test_a_search_finds_one_key_and_is_echoed_escaped(server):
    ref = server.ledgers.payments.refund("T-7:refund", ticket="T-7", amount="1.00", currency="EUR")
    server.ledgers.payments.refund("T-8:refund", ticket="T-8", amount="2.00", currency="EUR")

    _, _, html = get(server, "/ledgers?q=T-7%3Arefund")
    assert ref in html and "T-8:refund" not in html

    _, _, html = get(server, "/ledgers?" + urllib.parse.urlencode({"q": '"><b>x'}))
    assert '"><b>x' not in html and "&quot;&gt;&lt;b&gt;x" in html
    assert "Nothing recorded." in html
