import { strict as assert } from 'assert';
import * as path from 'path';
import { test } from 'node:test';
import {
  coeditItems,
  answerMarkdown,
  editNotice,
  errorMessage,
  formatCost,
  formatCount,
  formatDate,
  isEmptyTokens,
  formatTokens,
  isCancellation,
  isHashMismatch,
  lineRanges,
  mentionsModelSetup,
  outsideSelectionText,
  parseSplitIndex,
  patchNotice,
  resolveRelatedPath,
  splitIndexItems,
  statusBarView,
  statusText,
} from '../../src/pure/format';
import { editArgs, executeParams } from '../../src/pure/protocol';

test('formatCount', () => {
  assert.equal(formatCount(0), '0');
  assert.equal(formatCount(999), '999');
  assert.equal(formatCount(1000), '1k');
  assert.equal(formatCount(1234), '1.2k');
  assert.equal(formatCount(56_789), '57k');
  assert.equal(formatCount(2_500_000), '2.5M');
  assert.equal(formatCount(undefined), '?');
});

test('formatTokens', () => {
  assert.equal(formatTokens({ input: 1500, output: 20, turns: 2 }), '2 turns, 1.5k in / 20 out tokens');
  assert.equal(formatTokens({ input: 1, output: 1, turns: 1 }), '1 turn, 1 in / 1 out tokens');
  assert.equal(formatTokens({ input: 1, output: 1 }), '1 in / 1 out tokens');
  assert.equal(formatTokens(undefined), '');
});

test('status bar shows the model and the last run tokens', () => {
  const v = statusBarView('running', 'gpt-x', { input: 12_345, output: 678, turns: 2 });
  assert.equal(v.text, '$(hubot) gpt-x · 12k↑ 678↓');
  assert.match(v.tooltip, /2 turns, 12k in \/ 678 out/);
  assert.equal(statusBarView('running', 'gpt-x').text, '$(hubot) gpt-x');
  assert.match(statusBarView('running', 'gpt-x', null, false).text, /not configured/);
  assert.match(statusBarView('failed', 'gpt-x').text, /error/);
  assert.match(statusBarView('starting', undefined).text, /spin/);
});

test('errorMessage takes the server message of a ResponseError-like object', () => {
  assert.equal(errorMessage({ code: -32602, message: "invalid argument 'uri': required" }), "invalid argument 'uri': required");
  assert.equal(errorMessage(new Error('boom')), 'boom');
  assert.equal(errorMessage('plain'), 'plain');
  assert.equal(errorMessage({ x: 1 }), '{"x":1}');
  assert.ok(isCancellation({ code: -32800, message: 'cancelled' }));
  assert.ok(!isCancellation(new Error('x')));
});

test('model-setup messages offer the settings', () => {
  assert.ok(mentionsModelSetup('No model configured: set nagent.baseUrl or the OPENAI_API_KEY environment variable'));
  assert.ok(!mentionsModelSetup('file is outside the workspace'));
});

const baseEdit = { response: 'Added retries.\nDetails…', edits: 2, conversation: { path: '/c', fileId: '1:2' }, tokens: { input: 100, output: 50, turns: 2 } };

test('edit notices', () => {
  const ok = editNotice({ ...baseEdit, applied: true });
  assert.equal(ok.level, 'info');
  assert.equal(ok.message, 'nagent applied 2 edits: Added retries. (2 turns, 100 in / 50 out tokens)');
  const rejected = editNotice({ ...baseEdit, applied: false, edits: 0, reason: 'conflict: the buffer changed' });
  assert.equal(rejected.level, 'warning');
  assert.match(rejected.message, /did not change the file: conflict/);
  assert.equal(editNotice({ ...baseEdit, applied: false, reason: 'no change' }).level, 'info');
  assert.equal(editNotice({ ...baseEdit, applied: false, reason: 'cancelled' }).level, 'info');
});

test('patch notices', () => {
  assert.match(patchNotice({ changed: false, applied: false, uri: 'u', edits: 0, patchPath: null }).message, /nothing to apply/);
  assert.match(patchNotice({ changed: true, applied: true, uri: 'u', edits: 1, patchPath: '/p' }).message, /applied \(1 edit\)/);
  assert.equal(patchNotice({ changed: true, applied: false, uri: 'u', edits: 1, patchPath: '/p' }).level, 'warning');
});

test('status text', () => {
  const t = statusText(
    { version: '0.1.0', stateRoot: '/r/.nagent', model: 'm', baseUrl: null, modelConfigured: false, configSources: ['defaults', 'initializationOptions'], workspaceFolders: ['/r'] },
    'nagent-lsp (from PATH)',
  );
  assert.match(t, /nagent-lsp 0\.1\.0/);
  assert.match(t, /NOT configured/);
  assert.match(t, /defaults < initializationOptions/);
  assert.match(t, /server: nagent-lsp \(from PATH\)/);
});

test('co-edit rows become quick pick items with resolved paths', () => {
  const exists = (p: string) => p === '/repo/src/b.py';
  const items = coeditItems([{ path: 'src/b.py', count: 6, rate: 0.6, level: 'high' }], 10, (p) => resolveRelatedPath(p, '/repo/src/pkg/a.py', exists));
  assert.equal(items[0].target, '/repo/src/b.py');
  assert.match(items[0].label, /src\/b\.py/);
  assert.equal(items[0].description, 'high · 6/10 commits (60%)');
});

test('resolveRelatedPath: absolute, repository root, ancestor search, fallback', () => {
  assert.equal(resolveRelatedPath('/abs/x', '/r/a.py', () => false), '/abs/x');
  assert.equal(resolveRelatedPath('x.py', '/r/s/a.py', () => false, '/r'), path.join('/r', 'x.py'));
  assert.equal(resolveRelatedPath('s/x.py', '/r/s/t/a.py', (p) => p === '/r/s/x.py'), '/r/s/x.py');
  assert.equal(resolveRelatedPath('x.py', '/r/s/a.py', () => false), '/r/s/x.py');
});

test('split index parsing and pick order (current file first, newest first)', () => {
  assert.equal(parseSplitIndex('/i', { nope: 1 }), undefined);
  const a = parseSplitIndex('/s/a/index.json', { source_path: '/r/a.py', segments: [{}, {}], created_at: '2026-01-01T00:00:00Z' })!;
  const b = parseSplitIndex('/s/b/index.json', { source_path: '/r/b.py', segment_count: 3, created_at: '2026-02-01T00:00:00Z' })!;
  const c = parseSplitIndex('/s/c/index.json', { source_path: '/r/c.py', segments: [{}], created_at: '2026-03-01T00:00:00Z' })!;
  assert.equal(a.segmentCount, 2);
  assert.equal(b.segmentCount, 3);
  const items = splitIndexItems([a, b, c], '/r/a.py');
  assert.deepEqual(items.map((i) => i.target), ['/s/a/index.json', '/s/c/index.json', '/s/b/index.json']);
  assert.match(items[0].description!, /current file/);
});

test('hash mismatch detection', () => {
  assert.ok(isHashMismatch('source file hash does not match index.json (expected a, got b)'));
  assert.ok(!isHashMismatch('segment not found'));
});

test('command arguments: one object, range only when not empty', () => {
  const r = { start: { line: 1, character: 0 }, end: { line: 3, character: 0 } };
  assert.deepEqual(editArgs('file:///a', 'do it', r), { uri: 'file:///a', request: 'do it', range: r });
  assert.deepEqual(editArgs('file:///a', 'do it', { start: { line: 1, character: 2 }, end: { line: 1, character: 2 } }), { uri: 'file:///a', request: 'do it' });
  assert.deepEqual(executeParams('nagent.status'), { command: 'nagent.status', arguments: [{}] });
});

test('cost and cache beside tokens', () => {
  // the server's cost is in US dollars: the unit is shown (issue 25 "cost has no unit")
  assert.equal(formatCost(0.0042), '$0.0042');
  assert.equal(formatCost(1.234), '$1.23');
  assert.equal(formatCost(null), '');
  assert.equal(formatTokens({ input: 1500, output: 20, turns: 2, cacheRead: 1000, cost: 0.0042 }), '2 turns, 1.5k in / 20 out tokens, 1k cached, cost $0.0042');
  const v = statusBarView('running', 'm', { input: 1000, output: 10, cost: 0.5 });
  assert.match(v.text, /1k↑ 10↓ · \$0\.50$/);
});

test('status bar shows a running state and a cancelled run keeps the last figures', () => {
  const v = statusBarView('running', 'm', { input: 1000, output: 10 }, true, 'editing app.py');
  assert.match(v.text, /sync~spin.*editing app\.py/);
  assert.ok(isEmptyTokens({ input: 0, output: 0, turns: 0 }));
  assert.ok(!isEmptyTokens({ input: 300, output: 0 }));
});

test('readable dates', () => {
  const now = new Date(2026, 10, 23, 15, 0);
  assert.equal(formatDate(new Date(2026, 10, 23, 14, 5).toISOString(), now), 'today 14:05');
  assert.equal(formatDate(new Date(2026, 10, 22, 9, 30).toISOString(), now), 'yesterday 09:30');
  assert.equal(formatDate(new Date(2026, 2, 3, 14, 5).toISOString(), now), '3 Mar 14:05');
  assert.equal(formatDate(new Date(2024, 2, 3).toISOString(), now), '3 Mar 2024');
  assert.equal(formatDate(new Date(2024, 2, 3).getTime() / 1000, now), '3 Mar 2024');
  assert.equal(formatDate('not a date', now), 'not a date');
  const items = splitIndexItems([{ indexPath: '/i', sourcePath: '/a.py', segmentCount: 2, created: '2024-03-03T10:00:00Z' }], undefined, now);
  assert.match(items[0].description ?? '', /split 3 Mar 2024/);
});

test('an answer as Markdown: file, request, response, tokens and cost', () => {
  const md = answerMarkdown({
    kind: 'Edit',
    file: '/w/app.py',
    request: 'rename greet',
    response: 'Renamed it.',
    tokens: { input: 1200, output: 30, cost: 0.01 },
    outcome: 'applied 1 edit',
    time: new Date(2026, 0, 1, 12, 0),
  });
  assert.match(md, /### Edit · app\.py/);
  assert.match(md, /> rename greet/);
  assert.match(md, /Renamed it\./);
  assert.match(md, /applied 1 edit · 1\.2k in \/ 30 out tokens, cost \$0\.01/);
});

test('an edit awaiting review says so', () => {
  const n = editNotice({ applied: false, response: 'ok', edits: 0, conversation: { path: '', fileId: '' }, tokens: { input: 1, output: 1 }, reason: 'awaiting review', proposal: 'p1', files: [{ uri: 'a', edits: 1, created: false }, { uri: 'b', edits: 1, created: false }] });
  assert.match(n.message, /proposes changes to 2 files for review/);
});

test('lineRanges: 1-based, sorted, runs compressed', () => {
  assert.equal(lineRanges([2, 9, 10, 11]), '3, 10–12');
  assert.equal(lineRanges([11, 9, 10, 2, 2]), '3, 10–12');
  assert.equal(lineRanges([0]), '1');
  assert.equal(lineRanges([]), '');
});

test('outsideSelectionText: files shortened, capped, empty without lines', () => {
  const outside = [
    { uri: 'file:///w/app.py', lines: [2, 9, 10, 11] },
    { uri: 'file:///w/pkg/util%20x.py', lines: [0, 1, 2, 3] },
  ];
  assert.equal(outsideSelectionText(outside), 'nagent also changed lines outside the selection: app.py 3, 10–12; util x.py 1–4');
  assert.equal(
    outsideSelectionText(outside, (u) => u.replace('file:///w/', '')),
    'nagent also changed lines outside the selection: app.py 3, 10–12; pkg/util%20x.py 1–4',
  );
  assert.equal(outsideSelectionText([]), '');
  assert.equal(outsideSelectionText(undefined), '');
  assert.equal(outsideSelectionText([{ uri: 'file:///w/a.py', lines: [] }]), '');
  const many = outsideSelectionText([{ uri: 'file:///w/a.py', lines: Array.from({ length: 200 }, (_, i) => i * 2) }], undefined, 100);
  assert.ok(many.length <= 100, many);
  assert.ok(many.startsWith('nagent also changed lines outside the selection: a.py 1, 3, 5'), many);
  assert.ok(many.endsWith(', …'), many);
});

test('editNotice and answerMarkdown carry the outside-selection warning', () => {
  const r = { applied: true, response: 'Done', edits: 2, conversation: { path: '/c', fileId: 'f' }, tokens: { input: 1, output: 1 } };
  const outside = 'nagent also changed lines outside the selection: app.py 8, 11';
  const n = editNotice(r, outside);
  assert.equal(n.level, 'warning');
  assert.ok(n.message.startsWith(`${outside}. nagent applied 2 edits: Done`), n.message);
  assert.equal(editNotice(r).level, 'info');
  const md = answerMarkdown({ kind: 'Edit', file: '/w/app.py', response: 'Done', outside, time: new Date(0) });
  assert.ok(md.includes(`**⚠ ${outside}**`), md);
});
