import { strict as assert } from 'assert';
import { test } from 'node:test';
import type { Hunk, Proposal } from '../../src/pure/protocol';
import { acceptedIds, Decision, lineStarts, locateHunks, nextUndecidedFile, offsetAt, proposedView, reviewOutcome, undecided } from '../../src/pure/review';

const r = (sl: number, sc: number, el: number, ec: number) => ({ start: { line: sl, character: sc }, end: { line: el, character: ec } });
const BASE = 'def greet(name):\n    return "Hello, " + name\n\n\nprint(greet("x"))\n';
const H1: Hunk = { id: 'h1', range: r(0, 0, 1, 0), oldText: 'def greet(name):\n', newText: 'def welcome(name):\n' };
const H2: Hunk = { id: 'h2', range: r(4, 0, 5, 0), oldText: 'print(greet("x"))\n', newText: 'print(welcome("x"))\nprint("done")\n' };

test('offsets of LSP positions (\\n, \\r\\n) clamp to the line', () => {
  assert.deepEqual(lineStarts('a\r\nb\nc'), [0, 3, 5]);
  assert.equal(offsetAt('a\r\nb\nc', { line: 1, character: 0 }), 3);
  assert.equal(offsetAt('a\r\nb\nc', { line: 0, character: 9 }), 1);
  assert.equal(offsetAt('a\r\nb\nc', { line: 9, character: 0 }), 6);
});

test('hunks are found at their range, or at their old text when lines moved', () => {
  assert.deepEqual(locateHunks(BASE, [H2, H1]).located.map((h) => h.hunk.id), ['h1', 'h2']);
  const moved = '# a new first line\n' + BASE;
  const { located, missing } = locateHunks(moved, [H1, H2]);
  assert.equal(missing.length, 0);
  assert.equal(moved.slice(located[0].start, located[0].end), H1.oldText);
  const gone = BASE.replace('print(greet("x"))', 'print(1)');
  assert.deepEqual(locateHunks(gone, [H1, H2]).missing.map((h) => h.id), ['h2']);
});

test('the proposed view applies undecided and accepted hunks, keeps rejected ones old, and places each hunk', () => {
  const none = proposedView(BASE, [H1, H2], new Map());
  assert.equal(none.text, 'def welcome(name):\n    return "Hello, " + name\n\n\nprint(welcome("x"))\nprint("done")\n');
  assert.deepEqual(none.hunks.map((h) => [h.id, h.startLine, h.endLine]), [['h1', 0, 0], ['h2', 4, 5]]);
  const decided = proposedView(BASE, [H1, H2], new Map<string, Decision>([['h2', 'reject'], ['h1', 'accept']]));
  assert.equal(decided.text, 'def welcome(name):\n    return "Hello, " + name\n\n\nprint(greet("x"))\n');
  assert.equal(decided.hunks.find((h) => h.id === 'h2')?.decision, 'reject');
});

test('a new file is one hunk on empty text', () => {
  const h: Hunk = { id: 'n1', range: r(0, 0, 0, 0), oldText: '', newText: 'x = 1\n' };
  assert.equal(proposedView('', [h], new Map()).text, 'x = 1\n');
});

test('decisions over a multi-file proposal', () => {
  const p: Proposal = {
    id: 'p',
    request: 'r',
    files: [
      { uri: 'file:///a.py', path: '/a.py', created: false, hunks: [H1] },
      { uri: 'file:///b.py', path: '/b.py', created: false, hunks: [H2] },
    ],
  };
  const d = new Map<string, Decision>();
  assert.deepEqual(undecided(p, d), ['h1', 'h2']);
  assert.equal(nextUndecidedFile(p, d), 0);
  d.set('h1', 'accept');
  assert.equal(nextUndecidedFile(p, d, 0), 1);
  d.set('h2', 'reject');
  assert.equal(nextUndecidedFile(p, d), -1);
  assert.deepEqual(acceptedIds(p, d), ['h1']);
  assert.equal(reviewOutcome(1, 1, 0), '1 of 2 changes accepted, 1 rejected');
});
