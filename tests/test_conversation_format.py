"""The conversation file: blocks, initial-context splice, appends, messages, turn status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nagent_lsp.core.model import Message
from nagent_lsp.tags import render_result
from nagent_lsp.tags.transcript import (
    INTERRUPTED,
    TurnStatus,
    agent_response_block,
    append_block,
    append_blocks,
    find_initial_context,
    last_turn_status,
    next_input_block,
    parse_blocks,
    parse_turn_status,
    render_block,
    set_initial_context,
    system_block,
    to_messages,
    user_prompt_block,
    utc_stamp,
)

# A file as nagent itself writes it (inline <system>, unescaped attrs, hook block, status line).
NAGENT_FILE = """\
<initial_context>
You are nagent.
Instance:
- conversation: x
</initial_context>

<nagent-read-result path="/r/notes.md">
notes
</nagent-read-result>
<user-prompt>
add retries
</user-prompt>
<hook-per-run exit_code="0">(no output)</hook-per-run>
<agent-response>
<nagent-shell>ls</nagent-shell>
</agent-response>
<system>1 non-protocol item was ignored.</system>
<nagent-turn-status utc="2025-01-02T03:04:05Z" turn="1" tokens_in_total="100" tokens_out_total="7" />
<nagent-shell-result>
exit_code: 0
stdout:
a.py
</nagent-shell-result>
<nagent-next-input>
continue
</nagent-next-input>
Interrupted..."""


def test_parses_a_nagent_written_file():
    blocks = parse_blocks(NAGENT_FILE)
    assert [b.kind for b in blocks] == [
        "initial_context",
        "nagent-read-result",
        "user-prompt",
        "hook-per-run",
        "agent-response",
        "system",
        "nagent-turn-status",
        "nagent-shell-result",
        "nagent-next-input",
        "interrupted",
    ]
    by_kind = {b.kind: b for b in blocks}
    assert by_kind["initial_context"].body == "You are nagent.\nInstance:\n- conversation: x"
    assert by_kind["nagent-read-result"].attr("path") == "/r/notes.md"
    assert by_kind["nagent-read-result"].body == "notes"
    assert by_kind["user-prompt"].body == "add retries"
    assert by_kind["hook-per-run"].body == "(no output)"
    assert by_kind["system"].body == "1 non-protocol item was ignored."
    assert by_kind["nagent-turn-status"].body is None
    assert by_kind["nagent-shell-result"].body == "exit_code: 0\nstdout:\na.py"
    for b in blocks:
        assert NAGENT_FILE[b.start : b.end] == b.raw


def test_free_text_and_unclosed_tags_are_text_blocks():
    text = "<user-prompt>\nhi\n</user-prompt>\nmy own note\n\n<user-prompt>\nstill typing\n"
    blocks = parse_blocks(text)
    assert [b.kind for b in blocks] == ["user-prompt", "text"]
    assert blocks[1].raw == "my own note\n\n<user-prompt>\nstill typing"


def test_a_tag_followed_by_text_on_its_line_is_text():
    blocks = parse_blocks("<b>bold</b> and more\n<system>x</system>")
    assert [(b.kind, b.raw) for b in blocks] == [("text", "<b>bold</b> and more"), ("system", "<system>x</system>")]


def test_bodies_are_not_scanned_for_blocks():
    text = agent_response_block('<nagent-write path="a">\n<user-prompt>\nx\n</user-prompt>\n</nagent-write>')
    assert [b.kind for b in parse_blocks(text)] == ["agent-response"]


def test_crlf_files_still_parse():
    text = "<user-prompt>\r\nhello\r\n</user-prompt>\r\nnote\r\n"
    blocks = parse_blocks(text)
    assert [(b.kind, b.body) for b in blocks] == [("user-prompt", "hello"), ("text", None)]
    assert blocks[1].raw == "note"


# --- initial context --------------------------------------------------------------------------


def test_new_conversation_is_the_block_and_a_newline():
    assert set_initial_context("", "ctx") == "<initial_context>\nctx\n</initial_context>\n"


def test_missing_context_is_prepended_with_a_blank_line():
    text = user_prompt_block("hi")
    assert set_initial_context(text, "ctx") == "<initial_context>\nctx\n</initial_context>\n\n" + text


def test_only_the_first_context_is_replaced_verbatim():
    rest = "\n" + user_prompt_block(r"keep \1 \g<0> $& exactly") + "\n<initial_context>\nsecond\n</initial_context>\n"
    text = "<initial_context>\nold\n</initial_context>" + rest
    new = set_initial_context(text, r"new \g<0> \s")
    assert new == "<initial_context>\nnew \\g<0> \\s\n</initial_context>" + rest
    blocks = parse_blocks(new)
    assert blocks[-1].body == "second"


def test_context_with_its_own_close_tag_survives_repeated_replacement():
    ctx = "target file:\n  s = '</initial_context>'\n"
    text = append_block(set_initial_context("", ctx), user_prompt_block("go"))
    found = find_initial_context(text)
    assert found is not None and found.body == ctx
    again = set_initial_context(text, "short")
    assert again == "<initial_context>\nshort\n</initial_context>\n\n" + user_prompt_block("go")


def test_a_broken_context_block_is_kept_as_text_and_a_new_one_prepended():
    text = "<initial_context>\nno end\n" + user_prompt_block("hi")
    new = set_initial_context(text, "ctx")
    assert new.endswith(text)
    assert [b.kind for b in parse_blocks(new)][0] == "initial_context"


# --- appends --------------------------------------------------------------------------------


def test_append_newline_discipline():
    assert append_block("", "<system>\nx\n</system>") == "<system>\nx\n</system>"
    assert append_block("a", "B") == "a\nB"
    assert append_block("a\n", "B") == "a\n\nB"
    assert append_blocks("", ["A", "B", INTERRUPTED]) == "A\nB\nInterrupted..."


def test_block_renderers():
    assert user_prompt_block("p") == "<user-prompt>\np\n</user-prompt>"
    assert agent_response_block("r") == "<agent-response>\nr\n</agent-response>"
    assert system_block("s") == "<system>\ns\n</system>"
    assert next_input_block("n") == "<nagent-next-input>\nn\n</nagent-next-input>"
    assert render_block("hook-per-run", "out", {"exit_code": 0}) == '<hook-per-run exit_code="0">\nout\n</hook-per-run>'


# --- messages -------------------------------------------------------------------------------


def test_messages_are_role_separated_and_telemetry_is_not_sent():
    messages = to_messages(NAGENT_FILE)
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0].content == "You are nagent.\nInstance:\n- conversation: x"
    assert messages[1].content == (
        '<nagent-read-result path="/r/notes.md">\nnotes\n</nagent-read-result>\n'
        "<user-prompt>\nadd retries\n</user-prompt>\n"
        '<hook-per-run exit_code="0">(no output)</hook-per-run>'
    )
    assert messages[2] == Message("assistant", "<nagent-shell>ls</nagent-shell>")
    assert messages[3].content.startswith("<system>1 non-protocol item was ignored.</system>\n<nagent-shell-result>")
    assert messages[3].content.endswith("</nagent-next-input>\nInterrupted...")
    assert all("nagent-turn-status" not in m.content for m in messages)


def test_system_message_is_first_even_if_the_user_moved_the_context():
    text = user_prompt_block("hi") + "\n" + "<initial_context>\nctx\n</initial_context>"
    assert to_messages(text) == [Message("system", "ctx"), Message("user", "<user-prompt>\nhi\n</user-prompt>")]


def test_no_context_means_no_system_message_and_empty_responses_are_dropped():
    text = append_blocks("", [user_prompt_block("a"), agent_response_block("  "), user_prompt_block("b")])
    assert to_messages(text) == [Message("user", "<user-prompt>\na\n</user-prompt>\n<user-prompt>\nb\n</user-prompt>")]
    assert to_messages("") == []


def test_consecutive_responses_merge_into_one_assistant_message():
    text = append_blocks(
        "", [agent_response_block("a"), TurnStatus(utc="u", turn=1).render(), agent_response_block("b")]
    )
    assert to_messages(text) == [Message("assistant", "a\nb")]


def test_framed_agent_response_sends_its_exact_body():
    reply = '<nagent-write path="x">\nclose: </agent-response>\n</nagent-write>'
    text = append_block(set_initial_context("", "c"), agent_response_block(reply))
    assert to_messages(text)[-1] == Message("assistant", reply)


# --- turn status ----------------------------------------------------------------------------


def test_turn_status_line_and_round_trip():
    status = TurnStatus(
        utc="2025-01-02T03:04:05Z",
        turn=3,
        tokens_in=120,
        tokens_out=30,
        tokens_in_total=400,
        tokens_out_total=90,
        estimated=True,
    )
    line = status.render()
    assert line == (
        '<nagent-turn-status utc="2025-01-02T03:04:05Z" turn="3" tokens_in="120" tokens_out="30" '
        'tokens_in_total="400" tokens_out_total="90" estimated="true" cache_read_total="0" stripped_turns="0" '
        'fabricated_turns="0" />'
    )
    assert "\n" not in line
    assert parse_turn_status(line) == status
    plain = TurnStatus(utc="u", turn=1).render()
    assert "estimated" not in plain
    # nagent's counters read back; what we do not keep (cache_write_total) is ignored
    nagent = parse_turn_status(
        '<nagent-turn-status utc="u" turn="1" cache_read_total="5" cache_write_total="7" stripped_turns="2" />'
    )
    assert nagent == TurnStatus(utc="u", turn=1, cache_read_total=5, stripped_turns=2)
    pointed = TurnStatus(utc="u", turn=2, stripped_turns=1, raw="/s/outputs/x.raw.txt")
    assert 'raw="/s/outputs/x.raw.txt"' in pointed.render() and parse_turn_status(pointed.render()) == pointed


def test_reading_nagent_and_hand_edited_status_lines():
    status = parse_turn_status('<nagent-turn-status utc="x" turn="2" tokens_in_total="10" tokens_out_total="oops" />')
    assert (status.turn, status.tokens_in_total, status.tokens_out_total, status.estimated) == (2, 10, 0, False)
    with pytest.raises(ValueError):
        parse_turn_status("<system>x</system>")


def test_last_turn_status_gives_running_totals():
    text = append_blocks(
        "",
        [
            TurnStatus(utc="a", turn=1, tokens_in_total=10).render(),
            user_prompt_block("x"),
            TurnStatus(utc="b", turn=2, tokens_in_total=25).render(),
            render_result("shell", {}, "exit_code: 0"),
        ],
    )
    assert last_turn_status(text).tokens_in_total == 25
    assert last_turn_status(user_prompt_block("x")) is None


def test_utc_stamp():
    assert utc_stamp(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2025-01-02T03:04:05Z"
    plus2 = timezone(timedelta(hours=2))
    assert utc_stamp(datetime(2025, 1, 2, 5, 4, 5, tzinfo=plus2)) == "2025-01-02T03:04:05Z"
    assert len(utc_stamp()) == 20


# --- properties -----------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
_tricky = st.one_of(
    _text,
    st.builds(
        lambda a, t, b: a + t + b,
        _text,
        st.sampled_from(
            [
                "</user-prompt>",
                "</agent-response>",
                "</nagent-read-result>",
                "</system>",
                "</initial_context>",
                "\nInterrupted...\n",
                "\n<user-prompt>\n",
                "\r",
                "\r\n",
            ]
        ),
        _text,
    ),
)
_attrs = st.dictionaries(
    st.from_regex(r"[a-z][a-z_]{0,6}", fullmatch=True).filter(lambda k: k != "body_chars"), _text, max_size=3
)
_block = st.one_of(
    st.tuples(st.sampled_from(["user-prompt", "agent-response", "system", "nagent-next-input"]), st.just({}), _tricky),
    st.tuples(
        st.sampled_from(["nagent-read-result", "nagent-shell-result", "nagent-write-result"]),
        _attrs,
        st.one_of(st.none(), _tricky),
    ),
    st.tuples(st.just("nagent-turn-status"), st.just({"utc": "u", "turn": "1"}), st.none()),
)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), _tricky), st.lists(_block, max_size=8))
def test_appended_blocks_are_recovered(context, specs):
    text = set_initial_context("", context) if context is not None else ""
    for name, attrs, body in specs:
        text = append_block(text, render_block(name, body, attrs))
    blocks = parse_blocks(text)
    expected = ([("initial_context", (), context)] if context is not None else []) + [
        (name, tuple(attrs.items()), body) for name, attrs, body in specs
    ]
    assert [(b.kind, b.attrs, b.body) for b in blocks] == expected
    # The splice replaces exactly the first block and leaves the rest byte-identical.
    replaced = set_initial_context(text, "NEW")
    if context is not None:
        first = blocks[0]
        assert replaced == text[: first.start] + "<initial_context>\nNEW\n</initial_context>" + text[first.end :]
    # Replaced or prepended, the new context comes first and every appended block follows intact.
    assert [(b.kind, b.body) for b in parse_blocks(replaced)] == [("initial_context", "NEW")] + [
        (n, b) for n, _, b in specs
    ]


_fragments = st.sampled_from(
    [
        "<user-prompt>",
        "</user-prompt>",
        "<agent-response>",
        "</agent-response>",
        "<initial_context>",
        "</initial_context>",
        '<nagent-turn-status turn="1" />',
        "Interrupted...",
        "<system>",
        "</system>",
        '<nagent-read-result path="a" body_chars="3">',
        "\n",
        "\n",
        " ",
        "word",
        "<",
        "/>",
        "\r\n",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_fragments, _text), max_size=25))
def test_parsing_and_messages_never_lose_user_text(parts):
    text = "".join(parts)
    blocks = parse_blocks(text)
    covered = [False] * len(text)
    last_end = 0
    for b in blocks:
        assert b.start >= last_end and text[b.start : b.end] == b.raw  # ordered, disjoint, exact
        last_end = b.end
        for i in range(b.start, b.end):
            covered[i] = True
    assert all(covered[i] or text[i].isspace() for i in range(len(text)))
    messages = to_messages(text)
    user_text = "\n".join(m.content for m in messages if m.role == "user")
    assistant_text = "\n".join(m.content for m in messages if m.role == "assistant")
    system_seen = False
    for b in blocks:
        if b.kind == "nagent-turn-status":
            continue
        if b.kind == "initial_context" and not system_seen:
            system_seen = True
            assert messages[0] == Message("system", b.body)
        elif b.kind == "agent-response":
            assert (b.body or "") in assistant_text
        else:
            assert b.raw in user_text
    assert [m.role for m in messages].count("system") <= 1
    assert all(a.role != b.role for a, b in zip(messages, messages[1:], strict=False))
