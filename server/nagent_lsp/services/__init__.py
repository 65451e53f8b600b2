"""Long-lived services behind the workflows (one per repository or state root), built on the adapters."""
