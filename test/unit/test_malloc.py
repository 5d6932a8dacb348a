import platform

from daemonjob.machinery.process.malloc import limit_malloc_arenas


def test_arenas_are_capped_on_glibc_only():
    assert limit_malloc_arenas(2) is (platform.libc_ver()[0] == "glibc")


def test_the_environment_variable_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas(2) is False
