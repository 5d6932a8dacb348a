"""kubectl's text formats: tables and documents, `-o` and its JSONPath, and durations.

The bottom of the plugin: imports no other part of it.
"""
