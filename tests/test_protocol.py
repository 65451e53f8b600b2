"""The tag protocol: reply parsing, result rendering, rules and correction texts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nagent_lsp.tags import (
    KNOWN_TAGS,
    Conversation,
    FilePatch,
    FileRead,
    Next,
    Read,
    Replace,
    Response,
    Shell,
    TagSyntaxError,
    Tool,
    Write,
    advisories,
    conversation_result_body,
    correction,
    escape_attr,
    exhausted_message,
    ignored_note,
    parse_element,
    parse_reply,
    protocol_rules,
    render_result,
    shell_result_body,
    unescape_attr,
)
from nagent_lsp.text.search_replace import Block

ALL_EIGHT = (
    '<nagent-read path="src/a.py"/>\n'
    '<nagent-file-read path="big.c" />\n'
    '<nagent-file-patch index="/s/index.json"/>\n'
    '<nagent-write path="a.py">\nprint("x" < 1 && y)\n</nagent-write>\n'
    '<nagent-replace path="a.py">\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n</nagent-replace>\n'
    "<nagent-shell>ls -la</nagent-shell>\n"
    '<nagent-tool name="calc/add">{"a": 1, "b": 2}</nagent-tool>\n'
    "<nagent-next>check the tests</nagent-next>\n"
    '<nagent-conversation conversation-file="worker">summarise</nagent-conversation>\n'
    '<nagent-conversation conversation-name="saved1">go on</nagent-conversation>\n'
    "<nagent-conversation>fresh</nagent-conversation>\n"
    "<nagent-response>done</nagent-response>"
)


# --- known tags ---------------------------------------------------------------------------


def test_all_eight_tags_parse_in_order():
    parsed = parse_reply(ALL_EIGHT)
    assert parsed.error is None and parsed.notes == ()
    assert parsed.actions == (
        Read("src/a.py"),
        FileRead("big.c"),
        FilePatch("/s/index.json"),
        Write("a.py", 'print("x" < 1 && y)\n'),
        Replace("a.py", (Block("old", "new"),)),
        Shell("ls -la"),
        Tool("calc/add", '{"a": 1, "b": 2}'),
        Next("check the tests"),
        Conversation("summarise", conversation_file="worker"),
        Conversation("go on", conversation_name="saved1"),
        Conversation("fresh"),
        Response("done"),
    )
    assert parsed.accepted and not parsed.is_final
    assert {type(a).tag for a in parsed.actions} == KNOWN_TAGS


def test_write_body_is_raw_and_drops_only_one_leading_newline():
    body = '\n\n<div>&amp; "q" </nagent-shell>\n'
    parsed = parse_reply(f'<nagent-write path="f">\n{body}</nagent-write>')
    assert parsed.actions == (Write("f", body),)
    crlf = parse_reply('<nagent-write path="f">\r\nx\r\n</nagent-write>')
    assert crlf.actions == (Write("f", "x\r\n"),)
    inline = parse_reply('<nagent-write path="f">x</nagent-write>')
    assert inline.actions == (Write("f", "x"),)


def test_first_close_tag_ends_a_body():
    parsed = parse_reply("<nagent-shell>echo a</nagent-shell>b</nagent-shell>")
    assert parsed.actions == (Shell("echo a"),)
    assert [n.kind for n in parsed.notes] == ["ignored"]  # "b</nagent-shell>" is prose


def test_attribute_entities_are_decoded():
    parsed = parse_reply('<nagent-read path="a &quot;b&quot; &amp; c&#10;d & e"/>')
    assert parsed.actions == (Read('a "b" & c\nd & e'),)


@pytest.mark.parametrize(
    "reply, message",
    [
        ('<nagent-read path="x">body</nagent-read>', '<nagent-read> must be self-closing: <nagent-read path="..." />'),
        ('<nagent-read path="x">', "<nagent-read> must be self-closing"),
        ("<nagent-read/>", '<nagent-read> needs exactly one attribute, path="..."'),
        ('<nagent-read path="x" mode="y"/>', '<nagent-read> needs exactly one attribute, path="..."'),
        ('<nagent-read file="x"/>', '<nagent-read> needs exactly one attribute, path="..."'),
        ('<nagent-file-patch path="x"/>', '<nagent-file-patch> needs exactly one attribute, index="..."'),
        ('<nagent-read path=""/>', "<nagent-read> has an empty path"),
        ("<nagent-read path=x/>", 'attribute path in <nagent-read> must be written path="..."'),
        ('<nagent-read path="x/>', "unterminated value for attribute path in <nagent-read>"),
        ('<nagent-read path="x"', "unterminated <nagent-read> tag"),
        ('<nagent-read path="a" path="b"/>', "duplicate attribute path in <nagent-read>"),
        ('<nagent-read path="a"mode="b"/>', "malformed <nagent-read> tag at 'm'"),
        ('<nagent-read path="a" / >', "malformed <nagent-read> tag: expected '/>'"),
        ('<nagent-read "a"/>', "expected an attribute name in <nagent-read>, got '\"'"),
        ("<nagent-shell>ls", "<nagent-shell> is not closed: missing </nagent-shell>"),
        ('<nagent-write path="f">content', "<nagent-write> is not closed: missing </nagent-write>"),
        ('<nagent-shell cwd="/">ls</nagent-shell>', "<nagent-shell> takes no attributes (got cwd)"),
        ("<nagent-shell>  \n </nagent-shell>", "<nagent-shell> has an empty body"),
        ("<nagent-next></nagent-next>", "<nagent-next> has an empty body"),
        ("<nagent-shell/>", "<nagent-shell> needs a body"),
        ('<nagent-write path="f"/>', "<nagent-write> needs a body"),
        ("<nagent-write>x</nagent-write>", '<nagent-write> needs exactly one attribute, path="..."'),
        ('<nagent-response x="1">hi</nagent-response>', "<nagent-response> takes no attributes"),
        (
            '<nagent-conversation model="x">p</nagent-conversation>',
            "<nagent-conversation> does not take model",
        ),
        (
            '<nagent-conversation conversation-file="a" conversation-name="b">p</nagent-conversation>',
            "takes only one of conversation-file or conversation-name",
        ),
        ("<nagent-conversation> </nagent-conversation>", "<nagent-conversation> needs a prompt body"),
    ],
)
def test_malformed_known_tags_reject_the_reply_with_a_named_problem(reply, message):
    parsed = parse_reply("<nagent-shell>pwd</nagent-shell>\n" + reply)
    assert parsed.error is not None, parsed
    assert message in parsed.error.message
    assert parsed.actions == ()  # the valid tag before it does not run either
    assert not parsed.accepted
    prefix = len("<nagent-shell>pwd</nagent-shell>\n")
    assert prefix <= parsed.error.offset <= prefix + len(reply)
    assert parsed.error.near == (("<nagent-shell>pwd</nagent-shell>\n" + reply)[parsed.error.offset :])[:80]


def test_error_offset_and_near_point_at_the_bad_tag():
    reply = "prose\n<nagent-read path=x/> tail"
    parsed = parse_reply(reply)
    assert parsed.error is not None
    assert parsed.error.offset == reply.index("=x/>")
    assert parsed.error.near == "=x/> tail"
    assert "offset" in str(parsed.error)


def test_unclosed_response_is_taken_to_the_end():
    parsed = parse_reply("<thought\n<nagent-response>All done.\nBye")
    assert parsed.actions == (Response("All done.\nBye"),)
    assert "unclosed-response" in [n.kind for n in parsed.notes]
    assert parsed.is_final
    assert parsed.canonical() == "<nagent-response>All done.\nBye</nagent-response>"


def test_unclosed_response_with_a_broken_open_tag_is_still_an_error():
    assert parse_reply('<nagent-response x="1>done').error is not None


# --- lenient parts --------------------------------------------------------------------------


def test_prose_and_unknown_tags_are_ignored_with_notes():
    reply = 'Sure! Here you go.\n<thought>I should read</thought>\n<nagent-read path="a"/>\nHope it helps'
    parsed = parse_reply(reply)
    assert parsed.actions == (Read("a"),)
    messages = [n.message for n in parsed.ignored]
    assert messages == [
        'prose: "Sure! Here you go."',
        'unknown tag <thought>: "<thought>I should read</thought>"',
        'prose: "Hope it helps"',
    ]
    assert parsed.accepted and parsed.cleaned
    assert parsed.canonical() == '<nagent-read path="a" />'


def test_a_leaked_unclosed_unknown_tag_is_skipped_to_the_next_tag():
    parsed = parse_reply("<thought>planning...\n<nagent-shell>make</nagent-shell>")
    assert parsed.actions == (Shell("make"),)
    assert [n.message.split(":")[0] for n in parsed.ignored] == ["malformed <thought>"]


def test_stray_close_tags_comparisons_and_comments_are_prose():
    parsed = parse_reply("</nagent-shell> a < b <!-- c --> <1>\n<nagent-next>x</nagent-next>")
    assert parsed.actions == (Next("x"),)
    assert len(parsed.ignored) == 1 and parsed.ignored[0].message.startswith("prose:")


def test_unknown_tag_bodies_are_not_run():
    parsed = parse_reply("<example><nagent-shell>rm -rf /</nagent-shell></example>")
    assert parsed.actions == ()
    assert not parsed.accepted
    assert "non-protocol" in correction(parsed)


def test_echoed_agent_response_wrapper_is_unwrapped():
    parsed = parse_reply("<agent-response>\n<nagent-shell>ls</nagent-shell>\n</agent-response>")
    assert parsed.actions == (Shell("ls"),)
    assert parsed.notes == ()


def test_empty_and_whitespace_replies_have_no_actions_and_no_error():
    for reply in ("", "  \n\t"):
        parsed = parse_reply(reply)
        assert parsed.actions == () and parsed.error is None and parsed.notes == ()
        assert "no protocol tags" in correction(parsed)


def test_lookalike_names_are_unknown_tags():
    parsed = parse_reply("<nagent-shellx>ls</nagent-shellx><NAGENT-SHELL>ls</NAGENT-SHELL>")
    assert parsed.actions == () and parsed.error is None
    assert len(parsed.ignored) == 2


# --- duplicates -------------------------------------------------------------------------------


def test_exact_duplicates_are_collapsed_first_kept():
    reply = "\n".join(
        ['<nagent-read path="a"/>', "<nagent-shell>ls</nagent-shell>", '<nagent-read path="a" />'] * 4
        + ["<nagent-response>ok</nagent-response>"]
    )
    parsed = parse_reply(reply)
    assert parsed.actions == (Read("a"), Shell("ls"), Response("ok"))
    assert parsed.duplicates == 10
    assert (
        parsed.canonical()
        == '<nagent-read path="a" />\n<nagent-shell>ls</nagent-shell>\n<nagent-response>ok</nagent-response>'
    )
    assert any("10 repeated" in a for a in advisories(parsed))


def test_distinct_actions_are_not_collapsed():
    parsed = parse_reply('<nagent-read path="a"/><nagent-read path="b"/><nagent-file-read path="a"/>')
    assert parsed.actions == (Read("a"), Read("b"), FileRead("a"))
    assert parsed.duplicates == 0


# --- fabrication ----------------------------------------------------------------------------


def test_a_fabricated_result_cuts_the_turn():
    reply = (
        "<nagent-shell>pytest</nagent-shell>\n"
        "<nagent-shell-result>\nexit_code: 0\n</nagent-shell-result>\n"
        '<nagent-write path="a">x</nagent-write>\n'
        "<nagent-response>All tests pass</nagent-response>"
    )
    parsed = parse_reply(reply)
    assert parsed.actions == (Shell("pytest"),)
    assert parsed.fabrication is not None
    assert parsed.fabrication.tag == "nagent-shell-result"
    assert parsed.fabrication.offset == reply.index("<nagent-shell-result>")
    assert parsed.fabrication.dropped == 2
    assert parsed.accepted  # the shell really runs; its real result follows
    notes = advisories(parsed)
    assert "<nagent-shell-result>" in notes[0] and "2 tag(s)" in notes[0]


@pytest.mark.parametrize(
    "fake",
    [
        '<nagent-turn-status utc="x" turn="2" />',
        "<system>ok</system>",
        '  <nagent-read-result path="a">',
        "<nagent-next-input>",
        "<user-prompt>thanks",
        '<hook-per-run exit_code="0">',
        "<nagent-anything-result>",
    ],
)
def test_any_driver_block_at_a_line_start_cuts(fake):
    parsed = parse_reply(f'<nagent-read path="a"/>\n{fake}\n<nagent-response>done</nagent-response>')
    assert parsed.actions == (Read("a"),)
    assert parsed.fabrication is not None and parsed.fabrication.dropped == 1


@pytest.mark.parametrize(
    "mention",
    [
        "The `<nagent-shell-result>` block will follow.",
        'I expect "<nagent-read-result>" next.',
        "- <nagent-shell-result> shows the output",
        "<thought>after <nagent-shell-result> I answer</thought>",
    ],
)
def test_mentioning_a_driver_tag_mid_line_does_not_cut(mention):
    parsed = parse_reply(f"{mention}\n<nagent-shell>ls</nagent-shell>")
    assert parsed.fabrication is None
    assert parsed.actions == (Shell("ls"),)


def test_driver_text_inside_a_body_is_content_not_fabrication():
    body = "\n<nagent-shell-result>\nexit_code: 0\n</nagent-shell-result>\n"
    parsed = parse_reply(f'<nagent-write path="t.txt">{body}</nagent-write>\n<nagent-response>ok</nagent-response>')
    assert parsed.fabrication is None
    assert parsed.actions == (Write("t.txt", body[1:]), Response("ok"))


def test_fabrication_inside_an_echoed_wrapper():
    reply = (
        "<agent-response>\n<nagent-shell>ls</nagent-shell>\n"
        "<nagent-shell-result>\nexit_code: 0\n</nagent-shell-result>\n"
        "<nagent-response>done</nagent-response>\n</agent-response>"
    )
    parsed = parse_reply(reply)
    assert parsed.actions == (Shell("ls"),)
    assert parsed.fabrication is not None and parsed.fabrication.dropped == 1


def test_a_reply_that_is_only_fabrication_has_nothing_to_run():
    parsed = parse_reply("<nagent-shell-result>\nexit_code: 0\nstdout:\nok\n</nagent-shell-result>")
    assert parsed.actions == () and parsed.fabrication.dropped == 0
    assert not parsed.accepted
    assert "Only the server writes that block" in correction(parsed)


def test_a_fabricating_reply_cannot_end_the_run():
    parsed = parse_reply('<nagent-response>Fixed.</nagent-response>\n<nagent-write-result path="a" status="ok" />')
    assert parsed.actions == (Response("Fixed."),)
    assert not parsed.accepted and not parsed.is_final
    assert "<nagent-write-result>" in correction(parsed)


def test_malformed_known_tags_after_the_cut_do_not_error():
    parsed = parse_reply("<nagent-next>a</nagent-next>\n<system>x</system>\n<nagent-read path=x/>")
    assert parsed.error is None
    assert parsed.actions == (Next("a"),)
    assert parsed.fabrication.dropped == 0


def test_prose_after_the_cut_is_not_reported():
    parsed = parse_reply("<nagent-next>a</nagent-next>\n<system>x</system>\nlots of prose")
    assert parsed.ignored == ()


# --- corrections ---------------------------------------------------------------------------


def test_correction_precedence_and_wording():
    ok = parse_reply("<nagent-shell>ls</nagent-shell>")
    assert correction(ok) is None
    assert correction(ok, truncated="length") is None
    bad = parse_reply("<nagent-shell>ls")
    assert "missing </nagent-shell>" in correction(bad)
    assert "rejected" in correction(bad)
    # A cut-off reply is a length problem, not a format one.
    assert "output limit" in correction(bad, truncated="length") and "length" in correction(bad, truncated="length")
    fab = parse_reply("<system>x</system>")
    assert "<system>" in correction(fab, truncated="length")


def test_ignored_note_does_not_echo_the_offending_text():
    parsed = parse_reply("<thought>secret plan</thought>\n<nagent-shell>ls</nagent-shell>")
    notes = advisories(parsed)
    assert notes == [ignored_note(1)]
    assert "non-protocol" in notes[0]
    assert "thought" not in notes[0] and "secret" not in notes[0]


def test_advisories_for_a_clean_reply_are_empty_and_truncation_is_reported():
    parsed = parse_reply("<nagent-shell>ls</nagent-shell>")
    assert advisories(parsed) == []
    assert "stop reason: length" in advisories(parsed, truncated="length")[0]


def test_exhausted_messages():
    assert "provider" in exhausted_message(True)
    assert "3 attempts" in exhausted_message(False)
    assert "nothing was applied" in exhausted_message(False)


# --- rules ---------------------------------------------------------------------------------


def test_rules_list_every_tag_form_and_each_form_parses():
    rules = protocol_rules()
    forms = [line.split(" — ")[0] for line in rules.splitlines() if line.startswith("<nagent-") and " — " in line]
    assert len(forms) == 12
    kinds = ["nagent-replace"]  # its blocks take lines of their own: the rules show it in full below the list
    for form in forms:
        if form.startswith("<nagent-replace"):
            continue
        parsed = parse_reply(form)
        assert parsed.error is None and len(parsed.actions) == 1, form
        kinds.append(type(parsed.actions[0]).tag)
    assert set(kinds) == KNOWN_TAGS
    assert "</initial_context>" not in rules  # the rules live inside that block


def test_rules_state_the_read_limit():
    assert "64 KiB" in protocol_rules()
    assert "128 KiB" in protocol_rules(131072)
    assert "1000 bytes" in protocol_rules(1000)


# --- results --------------------------------------------------------------------------------


def test_read_result_shape():
    assert render_result("read", {"path": "a.py"}, "x = 1\n") == (
        '<nagent-read-result path="a.py">\nx = 1\n\n</nagent-read-result>'
    )
    assert render_result("nagent-read", {"path": "a"}, "x") == '<nagent-read-result path="a">\nx\n</nagent-read-result>'


def test_error_result_is_self_closing_with_escaped_attributes():
    out = render_result(
        "read",
        {"path": 'we"ird&<p>\n', "error": 'file too large; use <nagent-file-read path="p"/>'},
    )
    assert out == (
        '<nagent-read-result path="we&quot;ird&amp;&lt;p&gt;&#10;" '
        'error="file too large; use &lt;nagent-file-read path=&quot;p&quot;/&gt;" />'
    )
    el = parse_element(out, 0)
    assert dict(el.attrs)["path"] == 'we"ird&<p>\n'
    assert "\n" not in out


def test_result_attribute_conversion_and_names():
    out = render_result(
        "nagent-write-result", [("path", "p"), ("status", "ok"), ("bytes", 12), ("changed", False), ("x", None)]
    )
    assert out == '<nagent-write-result path="p" status="ok" bytes="12" changed="false" />'
    with pytest.raises(ValueError):
        render_result("delete", {}, "x")
    with pytest.raises(ValueError):
        render_result("read", {"bad name": "x"}, "y")
    with pytest.raises(ValueError):
        render_result("read", {"body_chars": "1"}, "y")


def test_a_body_holding_its_own_close_tag_is_framed_and_reads_back():
    body = "tests use </nagent-read-result> literally\n"
    out = render_result("read", {"path": "t.py"}, body)
    assert f'body_chars="{len(body)}"' in out
    el = parse_element(out + "\ntrailing </nagent-read-result>", 0, framed=True)
    assert el.body == body and dict(el.attrs) == {"path": "t.py"}
    # Unframed (as a model would read it) the first close tag wins: why the frame exists.
    assert parse_element(out, 0).body != "\n" + body + "\n"


def test_shell_and_conversation_result_bodies():
    assert shell_result_body(0, "a\nb\n\n", "") == "exit_code: 0\nstdout:\na\nb"
    assert shell_result_body(2, "", "boom\n") == "exit_code: 2\nstderr:\nboom"
    assert shell_result_body(1, "", "") == "exit_code: 1"
    assert conversation_result_body(0, "answer", "warn") == "exit_code: 0\noutput:\nanswer\nstderr:\nwarn"


def test_lexer_errors_carry_offsets():
    with pytest.raises(TagSyntaxError) as info:
        parse_element('xx<a b="1"', 2)
    assert info.value.offset == 2
    with pytest.raises(TagSyntaxError, match="expected '<'"):
        parse_element("abc", 0)
    with pytest.raises(TagSyntaxError, match="expected a tag name"):
        parse_element("< a>", 0)


# --- properties -----------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_word = _text.map(str.strip).filter(bool)


def _without(close: str):
    return lambda s: close not in s and "</agent-response>" not in s


_actions = st.one_of(
    _text.map(str.strip).filter(_without("</nagent-response>")).map(Response),
    _word.map(Read),
    _word.map(FileRead),
    _word.map(FilePatch),
    st.builds(Write, _word, _text.filter(_without("</nagent-write>"))),
    _word.filter(_without("</nagent-shell>")).map(Shell),
    _word.filter(_without("</nagent-next>")).map(Next),
    st.builds(
        Conversation,
        _word.filter(_without("</nagent-conversation>")),
        st.one_of(st.none(), _word),
    ),
    st.builds(
        lambda p, n: Conversation(p, conversation_name=n), _word.filter(_without("</nagent-conversation>")), _word
    ),
)
_prose = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(lambda c: c != "<"), max_size=20)


def _dedup(actions):
    seen, out = set(), []
    for a in actions:
        if a not in seen:
            seen.add(a)
            out.append(a)
    return tuple(out)


@settings(max_examples=100, deadline=None)
@given(st.lists(_actions, max_size=8), st.lists(_prose, min_size=9, max_size=9), st.booleans())
def test_canonical_tags_parse_back_to_the_same_actions(actions, prose, wrap):
    reply = "".join(p + a.to_tag() for p, a in zip(prose, actions, strict=False)) + prose[-1]
    if wrap:
        reply = "<agent-response>\n" + reply + "\n</agent-response>"
    parsed = parse_reply(reply)
    assert parsed.error is None
    assert parsed.fabrication is None
    assert parsed.actions == _dedup(actions)
    assert parse_reply(parsed.canonical()).actions == parsed.actions


_fragments = st.sampled_from(
    [
        "<nagent-shell>",
        "</nagent-shell>",
        '<nagent-read path="a"/>',
        "<nagent-response>",
        "</nagent-response>",
        '<nagent-write path="x">',
        "</nagent-write>",
        "<nagent-shell-result>",
        "<system>",
        "</system>",
        "<agent-response>",
        "</agent-response>",
        "<thought>",
        "<",
        ">",
        '"',
        "=",
        "/>",
        "\n",
        " ",
        "text",
        'path="',
        "&quot;",
        '<nagent-conversation conversation-file="a">',
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_fragments, _text), max_size=30))
def test_parse_reply_never_raises_and_is_consistent(parts):
    reply = "".join(parts)
    parsed = parse_reply(reply)
    if parsed.error is not None:
        assert parsed.actions == ()
        assert 0 <= parsed.error.offset <= len(reply)
    assert len(set(parsed.actions)) == len(parsed.actions)
    if parsed.accepted:
        assert correction(parsed) is None


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["read", "file-read", "file-patch", "write", "shell", "conversation"]),
    st.dictionaries(
        st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True).filter(lambda k: k != "body_chars"), _text, max_size=4
    ),
    st.one_of(st.none(), _text, _text.map(lambda s: s + "</nagent-shell-result>" + s)),
)
def test_rendered_results_parse_back(kind, attrs, body):
    out = render_result(kind, attrs, body)
    el = parse_element(out, 0, framed=True)
    assert el.name == f"nagent-{kind}-result"
    assert dict(el.attrs) == attrs
    assert el.body == body
    assert el.end == len(out)
    assert "\n" not in out[: el.open_end]  # the opening tag stays on one line


@given(_text)
def test_escape_round_trip(value):
    assert unescape_attr(escape_attr(value)) == value
    assert not re.search(r'["<>\n\r]', escape_attr(value))
