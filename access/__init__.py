"""Who may knock on which door: the access rules of every URL, and who is knocking.

The console's pages and the agent API both declare an access rule per URL, and both need
the client's address (login lockouts, the API's failed-auth limit). Those pieces live here,
below both and above the domain:

    console/ (project, pages, the Django admin)   workflows/api/ (the agent API)
                          \\                      /
                           access/ (rules, addresses)
                                     |
                  workflows/ (the domain: models, roles, tasks, clocks)

Arrows point down only; ``tests/test_import_directions.py`` fails on one that points up,
lazy imports inside functions included. ``access`` is a plain package, not a Django app: it
has no models, templates or migrations. The role facts it builds on (names, who holds
which, who may own work) are the domain's, in ``workflows.roles``.
"""
