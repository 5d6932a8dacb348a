"""Messages cut to what the API carries, with a visible marker where they were cut.

A message quotes what a user wrote (a bad value, a selector) or what the API server said, so
its size is the user's to choose: a 1 MB `restartPolicy` made a 1 MB `Stalled` message, too
big for a status write to carry. Event messages are cut to the 1024 bytes the API server's
validation allows; condition messages to 32 KiB, the bound of metav1.Condition's message.
Cut on a UTF-8 character boundary, by bytes (what the API server counts), never mid-character.
"""

from __future__ import annotations

from daemonjob import defaults

__all__ = ["truncate", "condition_message", "event_message"]


def truncate(text: str, max_bytes: int) -> str:
    """`text` if it fits in `max_bytes` (UTF-8), else its head and `... [N more bytes]`, in all
    at most `max_bytes`."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(f"... [{len(data)} more bytes]")  # the marker's longest form
    head = data[: max(room, 0)].decode("utf-8", "ignore")  # a cut character is dropped whole
    rest = len(data) - len(head.encode("utf-8", "surrogatepass"))
    return f"{head}... [{rest} more bytes]"


def condition_message(text: str) -> str:
    return truncate(text, defaults.CONDITION_MESSAGE_MAX_BYTES)


def event_message(text: str) -> str:
    return truncate(text, defaults.EVENT_MESSAGE_MAX_BYTES)
