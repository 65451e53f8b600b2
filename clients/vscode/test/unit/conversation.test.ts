import { strict as assert } from 'assert';
import { test } from 'node:test';
import { conversationFolds, isConversationPath, trailingRequest } from '../../src/pure/conversation';

const CONV = [
  '<initial_context>',
  'role and rules',
  '{file-history}',
  '</initial_context>',
  '<user-prompt>',
  'rename greet',
  '</user-prompt>',
  '<agent-response>',
  'done',
  '</agent-response>',
  '<nagent-turn-status utc="x" turn="1" />',
  '<user-prompt>one line</user-prompt>',
  '',
].join('\n');

test('conversation paths: conversations and saves, not the index', () => {
  assert.ok(isConversationPath('/r/.nagent/conversations/app-bdac0ac2-c86a-43a7-bba7-70946640a47d'));
  assert.ok(isConversationPath('/r/.nagent/conversations/saved/mine'));
  assert.ok(!isConversationPath('/r/.nagent/conversations/file-index.json'));
  assert.ok(!isConversationPath('/r/src/app.py'));
  assert.ok(isConversationPath('/custom/state/conversations/x-bdac0ac2-c86a-43a7-bba7-70946640a47d'));
});

test('folds: one per multi-line block, the initial context first', () => {
  assert.deepEqual(conversationFolds(CONV), [
    { start: 0, end: 3, tag: 'initial_context' },
    { start: 4, end: 6, tag: 'user-prompt' },
    { start: 7, end: 9, tag: 'agent-response' },
  ]);
  assert.deepEqual(conversationFolds('<initial_context>\nnot closed'), []);
});

test('the request typed after the last block', () => {
  assert.equal(trailingRequest(CONV), undefined);
  const typed = CONV + '\nnow add a docstring\nplease\n';
  const t = trailingRequest(typed);
  assert.ok(t);
  assert.equal(t.request, 'now add a docstring\nplease');
  assert.equal(typed.slice(t.start).trim(), t.request);
  assert.equal(trailingRequest('Interrupted...\nretry')?.request, 'retry');
  // text inside the conversation (not after the last block) is not a request
  assert.equal(trailingRequest('<user-prompt>\nx\n</user-prompt>\n'), undefined);
});

test('@path mentions: plain, or quoted when the path has spaces (contracts.md D)', async () => {
  const { mentionText } = await import('../../src/pure/conversation');
  assert.equal(mentionText('src/calc.py'), '@src/calc.py');
  assert.equal(mentionText('docs/a b.md'), '@"docs/a b.md"');
  assert.equal(mentionText('x"y z.py'), '@"x\\"y z.py"');
});

test('the chat hint at the end says how to send: empty, after a turn, and with a typed draft (issue 25)', async () => {
  const { draftHint } = await import('../../src/pure/conversation');
  assert.deepEqual(draftHint(''), { line: 0, title: '$(comment-discussion) Type your first request here, then press Ctrl+Enter to send it' });
  const after = draftHint('<user-prompt>x</user-prompt>\n<agent-response>y</agent-response>\n');
  assert.equal(after.line, 2);
  assert.match(after.title, /Type your next request below, then press Ctrl\+Enter/);
  assert.equal(draftHint('<user-prompt>x</user-prompt>\nadd tests\n').title, '$(send) Send this request (Ctrl+Enter)');
});
