"""Edits that end past a document's final line break, moved onto its last line (issue 25, item 5).

`minimal_edits` puts an insertion at the end of a file at `(line_count, 0)`: the position after the final line
break, which LSP allows but which is no line of an editor's buffer. Neovim (0.11 as 0.7) keeps a file's final
newline outside its lines (`'eol'`), so `apply_text_edits` appends an edit starting there with
`nvim_buf_set_lines`, and the new text's own trailing newline becomes an extra blank line. The same change
expressed inside the buffer's lines — insert `"\\n" + text without its last newline` at the end of the last line —
is the same text in every client, so the LSP port sends that instead. Pure: no editor, no disk.
"""

from __future__ import annotations

from nagent_lsp.text.edits import TextEditSpec, line_count_before, split_lines

_BREAKS = ("\r\n", "\r", "\n")


def _terminator(line: str) -> str:
    return next((b for b in _BREAKS if line.endswith(b)), "")


def _units(text: str, encoding: str) -> int:
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text)


def within_lines(old: str, specs: list[TextEditSpec], encoding: str) -> list[TextEditSpec]:
    """`specs` (document order, positions in `old`) with a last edit ending after `old`'s final line break moved
    to end at its last line's end, when the same text can be said that way:

    - an insertion (or a deletion) at a line start that runs to the end: it starts at the end of the line before
      instead, the line break moving from after the new text to before it;
    - any other edit whose new text ends with that line break: the break stays where it is.

    Anything else (the new text drops the final newline) is left as it was."""
    if not specs or not old.endswith(("\n", "\r")):
        return specs
    last = specs[-1]
    # Counting the line breaks decides the usual case (no edit ends past the final break) without splitting a
    # large text into its lines on every delivery.
    if (last.end_line, last.end_char) != (line_count_before(old, len(old)), 0):
        return specs
    lines = split_lines(old)
    brk = _terminator(lines[-1])

    def line_end(i: int) -> tuple[int, int]:
        content = lines[i][: len(lines[i]) - len(_terminator(lines[i]))]
        return i, _units(content, encoding)

    end_line, end_char = line_end(len(lines) - 1)
    text = last.new_text
    line, char = last.start_line, last.start_char
    if char == 0 and 1 <= line and _terminator(lines[line - 1]) == brk and (brk + text).endswith(brk):
        start_line, start_char = line_end(line - 1)
        moved = TextEditSpec(start_line, start_char, end_line, end_char, (brk + text)[: -len(brk)])
    elif text.endswith(brk) and (line, char) != (len(lines), 0):
        moved = TextEditSpec(line, char, end_line, end_char, text[: -len(brk)])
    else:
        return specs
    if len(specs) > 1 and (specs[-2].end_line, specs[-2].end_char) > (moved.start_line, moved.start_char):
        return specs  # never overlap the edit before it
    return [*specs[:-1], moved]
