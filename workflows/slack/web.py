"""The only module that talks to Slack's Web API, through the official slack_sdk ``WebClient``.

Its base URL is ``settings.SLACK_API_URL``: the tests and the demo point it at a loopback fake.
Every failure comes out as ``SlackUnavailable`` with a readable reason and, on a rate limit,
Slack's ``Retry-After`` in seconds; the outbox records it and tries again.
"""

from __future__ import annotations

from django.conf import settings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from ..models.slack import SlackWorkspace
from ..shapes import Json, JsonObject


class SlackUnavailable(Exception):
    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def client(workspace: SlackWorkspace) -> WebClient:
    return WebClient(
        token=workspace.bot_token, base_url=settings.SLACK_API_URL, timeout=int(max(1, settings.SLACK_TIMEOUT_SECONDS))
    )


def call(workspace: SlackWorkspace, method: str, **arguments: Json) -> JsonObject:
    """Call one Web API method (``chat.postMessage``…) with JSON arguments; its answer, or SlackUnavailable."""
    return _api_call(workspace, method, json=arguments)


def read(workspace: SlackWorkspace, method: str, **arguments: str) -> JsonObject:
    """Call a read method (``users.info``) as slack_sdk's own ``users_info`` does: a form, not JSON (Slack's
    read methods take no JSON body); its answer, or SlackUnavailable."""
    return _api_call(workspace, method, http_verb="GET", params=arguments)


def _api_call(
    workspace: SlackWorkspace,
    method: str,
    *,
    http_verb: str = "POST",
    params: dict[str, str] | None = None,
    json: JsonObject | None = None,
) -> JsonObject:
    try:
        response = client(workspace).api_call(method, http_verb=http_verb, params=params, json=json)
    except SlackApiError as exc:
        status = exc.response.status_code
        retry_after = None
        if status == 429:
            header = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
            try:
                retry_after = max(1.0, float(header)) if header is not None else None
            except ValueError:
                retry_after = None
        error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
        raise SlackUnavailable(
            f"Slack answered {method} with {status}: {error or 'an error'}", retry_after=retry_after
        ) from exc
    except (SlackClientError, OSError) as exc:
        raise SlackUnavailable(f"Slack could not be reached for {method}: {type(exc).__name__}: {exc}") from exc
    data = response.data
    return data if isinstance(data, dict) else {}
