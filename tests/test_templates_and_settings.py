"""Templates name the domain through the models, share one SLA timer, and say what their answers vary on
(console.security sets the Vary header); settings read the .env file before anything that it may set."""

import os
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.template import Context, Template
from django.urls import reverse

from tests.helpers import make_checkpoint

TEMPLATES = Path(settings.BASE_DIR) / "templates"


def test_the_sla_countdown_markup_lives_in_one_partial():
    holders = sorted(p.name for p in TEMPLATES.rglob("*.html") if "data-due=" in p.read_text())
    assert holders == ["_sla_timer.html"]
    users = sorted(p.name for p in TEMPLATES.rglob("*.html") if "console/_sla_timer.html" in p.read_text())
    assert users == ["_queue_row.html", "mine.html", "queue.html", "workbench.html"]  # queue.html: incident rows


def test_every_page_with_a_clock_renders_the_partial(client, alice):
    checkpoint = make_checkpoint()
    checkpoint.claim(by=alice)
    client.force_login(alice)
    for url in (reverse("queue"), reverse("mine"), reverse("workbench", args=[checkpoint.pk])):
        html = client.get(url).content.decode()
        assert f'data-due="{checkpoint.due_at.isoformat()}"' in html, url
        assert "left</span>" in html, url


def test_no_attribute_value_carries_a_line_break_from_a_wrapped_template(client, alice):
    """Wrapping a long template line inside a quoted value would put the line break and indentation into
    a tooltip, an aria-label or the abort confirmation; values are checked as the browser parses them."""
    from html.parser import HTMLParser

    checkpoint = make_checkpoint()
    checkpoint.claim(by=alice)
    client.force_login(alice)
    broken: list[tuple[str, str, str]] = []

    class Values(HTMLParser):
        def handle_starttag(self, tag, attrs):
            broken.extend(
                (url, name, value)
                for name, value in attrs
                if value and "\n" in value and name not in ("hx-vals", "content")
            )

    for url in (
        reverse("queue"),
        reverse("mine"),
        reverse("workbench", args=[checkpoint.pk]),
        reverse("workflow", args=[checkpoint.workflow_id]),
        reverse("notifications"),
    ):
        Values().feed(client.get(url).content.decode())
    assert broken == []


def test_no_template_compares_a_status_with_a_string():
    found = [
        f"{p.name}: {m}"
        for p in TEMPLATES.rglob("*.html")
        for m in re.findall(r"status\s*[!=]=\s*['\"]\w+['\"]", p.read_text())
    ]
    assert found == []


def test_partialdef_is_a_builtin_tag():
    template = Template("{% partialdef greeting inline %}hello{% endpartialdef %}")
    assert template.render(Context()) == "hello"


def test_pages_with_htmx_partials_vary_on_the_headers_that_pick_them(client, alice):
    client.force_login(alice)
    checkpoint = make_checkpoint()
    for url in (reverse("queue"), reverse("workbench", args=[checkpoint.pk])):
        vary = {v.strip() for v in client.get(url)["Vary"].split(",")}
        assert {"HX-Request", "HX-Target"} <= vary, url


def test_the_login_page_varies_on_hx_request(client, db):
    assert "HX-Request" in client.get(reverse("login"))["Vary"]


def test_a_var_dir_in_the_env_file_is_used(tmp_path):
    env_file = tmp_path / "console.env"
    env_file.write_text(f"VAR_DIR={tmp_path / 'from-env-file'}\nSECRET_KEY=test-only-secret-key\n")
    environment = {k: v for k, v in os.environ.items() if k not in ("VAR_DIR", "DATABASE_URL")}
    environment.update(ENV_FILE=str(env_file), DJANGO_SETTINGS_MODULE="console.settings")
    printed = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.VAR_DIR)"],
        env=environment,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert printed == str(tmp_path / "from-env-file")
    assert (tmp_path / "from-env-file").is_dir()
