# SPDX-License-Identifier: BSD-2-Clause
"""Each test's outcome on its item (item.rep_call), so that a fixture's
teardown can tell a failed test from a passed one (pytest's documented
recipe)."""
import pytest


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
