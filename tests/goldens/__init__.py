"""Upstream's golden vectors of the scalar kinds as a test suite (see ``test_goldens``)."""
