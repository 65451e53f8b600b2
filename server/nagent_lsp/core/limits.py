"""Sizes the whole server agrees on (nagent's: a model reads at most 64 KiB of a file inline)."""

INLINE_LIMIT = 64 * 1024  # bytes of UTF-8: larger files are read, summarised and edited through split segments
SPLIT_TARGET = 32 * 1024  # bytes per split segment, by default
