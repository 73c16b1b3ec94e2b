"""fabrikito: run a team of Claude Code seats in tmux and carry messages between them."""

__version__ = "0.1.0"

# ``typing.TYPE_CHECKING`` without importing ``typing`` (a hot path's import costs are measured:
# docs/benchmarks.md): a module writes ``from fabrikito import TYPE_CHECKING`` and, under
# ``if TYPE_CHECKING:``, imports what only its annotations need.  mypy takes any name TYPE_CHECKING as true.
TYPE_CHECKING = False
