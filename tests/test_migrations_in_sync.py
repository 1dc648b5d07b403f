"""The models and the migrations say the same: a field changed without its migration fails here, not in
production's `migrate`."""

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_is_missing_its_migration():
    try:
        call_command("makemigrations", "--check", "--dry-run", verbosity=0)
    except SystemExit as exit_:  # --check exits 1 when a migration would be written
        pytest.fail(f"a model change has no migration (makemigrations --check exited {exit_.code})")
