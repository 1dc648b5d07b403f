"""The demo agent fleet: simulated support agents and the external systems they touch.

Nothing here writes to the console's database: agents report everything over the
real HTTP API through ``recovery_client.RecoveryClient`` (the package in
``clients/python``), exactly as a third-party agent runtime would. The simulated
systems keep their own ledgers in SQLite under ``VAR_DIR/demo`` so an operator
(and the tests) can check what really happened.
"""
