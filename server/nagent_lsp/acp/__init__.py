"""The Agent Client Protocol front end (`nagent-lsp acp`); the ACP SDK is imported only in this package."""
