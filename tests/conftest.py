"""Shared pytest configuration: say plainly which optional tests a run skipped."""

import importlib.util


def pytest_terminal_summary(terminalreporter):
    if importlib.util.find_spec("flwr") is None:
        terminalreporter.write_line(
            "skdp: the Flower engine tests were skipped (no flwr); run them with the "
            "federated extra: pip install -e \".[test,federated]\"")
