import pytest
from opinfo import sweep


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Overrides the suite-wide reset: each sweep run has its own code object, and
    ``sweep.run`` resets Dynamo every ``RESET_EVERY`` runs."""
    with sweep.fast_dynamo():
        yield
