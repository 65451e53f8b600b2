"""nagent-lsp: per-file LLM conversations with git history context, as a language server."""

__version__ = "0.1.0"
