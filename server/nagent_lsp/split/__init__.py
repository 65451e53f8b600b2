"""Split large files into indexed segments at natural boundaries (pure domain: bytes in, files + index out)."""

from nagent_lsp.split.rules import (
    TYPES,
    UnknownSplitType,
    detect_split_type,
    normalize_split_type,
)
from nagent_lsp.split.segmenter import TARGET_BYTES_DEFAULT, Segment, count_lines, plan_segments
from nagent_lsp.split.store import (
    SplitError,
    SplitResult,
    build_index,
    load_index,
    refresh_split,
    remove_stale_segments,
    segment_name,
    sha256_bytes,
    slug,
    split_text,
    write_index,
)

__all__ = [
    "TARGET_BYTES_DEFAULT",
    "TYPES",
    "Segment",
    "SplitError",
    "SplitResult",
    "UnknownSplitType",
    "build_index",
    "count_lines",
    "detect_split_type",
    "load_index",
    "normalize_split_type",
    "plan_segments",
    "refresh_split",
    "remove_stale_segments",
    "segment_name",
    "sha256_bytes",
    "slug",
    "split_text",
    "write_index",
]
