"""The queue contract's backend fixtures, for every contract module."""

from tests.contract.test_queue_contract import make_queue, pg_url  # noqa: F401
