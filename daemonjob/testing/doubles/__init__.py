"""Test doubles for unit tests without a cluster: fake informers and writers (`fakes`,
`nodefakes`), the act layer's harness (`actbed`), builders of the objects tests feed the
controller, and decisions over Jobs as tests hold them. May import every layer below testing.
"""
