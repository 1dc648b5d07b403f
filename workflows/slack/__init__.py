"""Slack as a channel: checkpoint messages that are live views, and buttons that act through the domain.

- ``web``: the only module that calls Slack's Web API (slack_sdk's WebClient).
- ``blocks``: what a checkpoint or a proposal looks like in Slack (Block Kit), and the decision modal.
- ``outbox``: every event about a checkpoint marks its messages behind; ``send_message`` catches one up.
- ``interactions``: a verified button press or modal submission, carried out by the domain's methods
  under ``acting_via(Via.SLACK)``.
"""
