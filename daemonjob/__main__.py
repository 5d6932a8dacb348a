import sys

# The controller process draws nothing: rich stays out of its memory (3.7 MB of RSS). Only
# structlog's console renderer would load it, for tracebacks it never formats here
# (logsetup's format_exc_info turns them into text first); the plugin draws with it in its own process.
sys.modules.setdefault("rich", None)  # type: ignore[arg-type]

from .cli import main  # noqa: E402

sys.exit(main())
