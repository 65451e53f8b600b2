import { strict as assert } from 'assert';
import { test } from 'node:test';
import { decideArgs, hunkAtLine, inlineSummary, placeHunks } from '../../src/pure/inlineReview';
import type { Hunk } from '../../src/pure/protocol';

const TEXT = 'def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n';
const doc: Hunk = { id: 'h1', range: { start: { line: 1, character: 0 }, end: { line: 1, character: 0 } }, oldText: '', newText: '    """Area."""\n' };
const per: Hunk = {
  id: 'h2',
  range: { start: { line: 5, character: 0 }, end: { line: 6, character: 0 } },
  oldText: '    return 2 * (w + h)\n',
  newText: '    return 2 * w + 2 * h\n',
};

test('hunks are placed where they apply; one whose lines changed is left out', () => {
  const placed = placeHunks(TEXT, [{ id: 'p', hunks: [per, doc, { ...per, id: 'h3', applies: false }] }]);
  assert.deepEqual(
    placed.map((h) => [h.hunk.id, h.startLine, h.endLine, h.insertion]),
    [
      ['h1', 1, 1, true],
      ['h2', 5, 5, false],
    ],
  );
  // the user typed two lines above: the hunk is found where its old text now is
  const moved = placeHunks('# one\n# two\n' + TEXT, [{ id: 'p', hunks: [per] }]);
  assert.equal(moved[0].startLine, 7);
});

test('the hunk at the cursor: the one holding the line, else the nearest', () => {
  const placed = placeHunks(TEXT, [{ id: 'p', hunks: [doc, per] }]);
  assert.equal(hunkAtLine(placed, 5)?.hunk.id, 'h2');
  assert.equal(hunkAtLine(placed, 1)?.hunk.id, 'h1');
  assert.equal(hunkAtLine(placed, 3)?.hunk.id, 'h2');
  assert.equal(hunkAtLine(placed, 0)?.hunk.id, 'h1');
  assert.equal(hunkAtLine([], 0), undefined);
});

test('inline text and the one-hunk decisions (the rest stays pending)', () => {
  assert.equal(inlineSummary(per), '→ return 2 * w + 2 * h');
  assert.equal(inlineSummary({ ...per, newText: 'a\nb\nc\n' }), '→ a (+2 more lines)');
  assert.equal(inlineSummary({ ...per, newText: '' }), '− 1 line removed');
  assert.deepEqual(decideArgs('p', 'h2', 'accept'), { command: 'nagent.review.apply', arg: { id: 'p', accept: ['h2'], rest: 'keep' } });
  assert.deepEqual(decideArgs('p', 'h2', 'reject'), { command: 'nagent.review.discard', arg: { id: 'p', hunks: ['h2'] } });
});
