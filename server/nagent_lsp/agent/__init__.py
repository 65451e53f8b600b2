"""The edit run: the model loop, and the actions it takes inside one editor session."""
