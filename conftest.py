pytest_plugins = ["daemonjob.testing.fixtures"]
