"""The operator console's pages, one module per page family.

- ``queue``: the queue and "My workflows"
- ``checkpoints``: the workbench and every decision taken on a checkpoint
- ``htmx``: the page or its targeted partial, messages as a toast, the redirect back (every view's plumbing)
- ``workflows``: a workflow's trajectory, replay, fork and failover
- ``incidents``, ``drills``, ``teams``: the pages of those features
- ``breaches``, ``dashboards``: the TPM's breach review, resume dashboard, readiness and staffing
- ``runbooks``, ``notifications``: the runbook editor and the notification inbox
- ``slack``, ``action_links``: decisions taken from outside the console (Slack, email links)

Every view declares its access rule (``access.rules``); the URLconf is ``console.ui_urls``.
"""
