"""fabrikito: run a team of Claude Code seats in tmux and carry messages between them."""

__version__ = "0.1.0"
