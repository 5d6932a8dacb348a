"""The project's own tests load the test bed's pytest plugin here; it is not registered on
install (see daemonjob/testing/pytest_plugin.py)."""

pytest_plugins = ["daemonjob.testing.pytest_plugin"]
