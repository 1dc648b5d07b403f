"""Comments as HTML: markdown written by people, shown to everyone, with their @mentions highlighted.

Raw HTML is off in the parser, and what it produces is cleaned by nh3 (an allow-list sanitizer) before it is
marked safe. Links get rel=noopener. The ``markdown`` filter of console_tags is ``render_markdown``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import nh3
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererProtocol
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable("image")
_ALLOWED_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "blockquote",
    "a",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "span",
}
_MENTION = re.compile(r"(?<![\w@/:.])@([\w.+-]*\w)")


def _highlight_mentions(state: StateCore) -> None:
    """A core rule: split the text tokens of each inline run at @mentions of ``env["mentions"]``.

    Only text tokens are touched, never the HTML the renderer makes from them: a mention inside a
    link's URL (an attribute) or inside code stays as written."""
    known: set[str] = state.env.get("mentions") or set()
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children = []
        for token in block.children:
            if token.type != "text" or "@" not in token.content:
                children.append(token)
                continue
            at = 0
            for match in _MENTION.finditer(token.content):
                if match.group(1) not in known:
                    continue
                children.append(_text(token.content[at : match.start()]))
                mention = Token("mention", "span", 0)
                mention.content = match.group(1)
                children.append(mention)
                at = match.end()
            children.append(_text(token.content[at:]))
        block.children = children


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _render_mention(
    renderer: RendererProtocol, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return format_html('<span class="mention">@{}</span>', tokens[idx].content)


_MARKDOWN.core.ruler.push("mentions", _highlight_mentions)
_MARKDOWN.add_render_rule("mention", _render_mention)


def render_markdown(text: str | None, mentions: Iterable[str] | None = ()) -> SafeString:
    """A comment as sanitized HTML, with its @mentions highlighted (in its text only)."""
    rendered = _MARKDOWN.render(str(text or ""), {"mentions": {str(m) for m in (mentions or [])}})
    html = nh3.clean(
        rendered,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href"}},
        allowed_classes={"span": {"mention"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(html)  # noqa: S308 - sanitized by nh3 just above
