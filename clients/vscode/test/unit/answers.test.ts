import { strict as assert } from 'assert';
import { test } from 'node:test';
import { AnswerEntry, answerMarkdown, editNotice, editOutcome, upsertAnswer } from '../../src/pure/format';

const t = new Date(0);

test('one reviewed run is one Answers entry: edit, proposal and review update it (issue 25)', () => {
  let list: AnswerEntry[] = [{ kind: 'Edit', file: '/w/older.py', response: 'older answer', time: t }];
  list = upsertAnswer(list, { key: 'p1', kind: 'Edit', file: '/w/a.py', request: 'doc area', response: 'Documented area().', tokens: { input: 10, output: 2 }, outcome: 'awaiting review', time: t });
  list = upsertAnswer(list, { key: 'p1', kind: 'Proposal', file: '/w/a.py', request: 'doc area', response: 'Documented area().', outcome: 'awaiting review', time: t });
  list = upsertAnswer(list, { key: 'p1', kind: 'Review', file: '/w/a.py', request: 'doc area', response: '', outcome: '1 of 2 changes accepted, 1 rejected', time: t });
  assert.equal(list.length, 2, JSON.stringify(list.map((a) => a.kind)));
  assert.equal(list[0].kind, 'Edit');
  assert.equal(list[0].response, 'Documented area().');
  assert.equal(list[0].outcome, '1 of 2 changes accepted, 1 rejected');
  assert.deepEqual(list[0].tokens, { input: 10, output: 2 });
  assert.equal(list[1].file, '/w/older.py');
  // entries without a key are always added
  list = upsertAnswer(list, { kind: 'Edit', file: '/w/b.py', response: 'x', time: t });
  assert.equal(list.length, 3);
  assert.equal(upsertAnswer(list, { kind: 'Edit', file: '/w/c.py', response: 'y', time: t }, 3).length, 3);
});

test('a plan/explain answer (no change) is an answer, not a failure (issue 25)', () => {
  const plan = { applied: false, response: 'Plan: 1. add a docstring', edits: 0, conversation: { path: '/c', fileId: '1' }, tokens: { input: 1, output: 1 }, reason: 'no change' };
  assert.equal(editOutcome(plan), 'answered, no file changed');
  const n = editNotice(plan);
  assert.equal(n.level, 'info');
  assert.match(n.message, /^nagent answered: Plan: 1\. add a docstring/);
  assert.doesNotMatch(n.message, /did not change/);
  const recipe = { outputs: { explanation: 'x' }, response: '', applied: false, edits: 0, tokens: { input: 1, output: 1 } };
  assert.equal(editOutcome(recipe), 'answered, no file changed');
  assert.equal(editOutcome({ ...plan, reason: 'conflict: the buffer changed' }), 'not applied: conflict: the buffer changed');
});

test("the server's message is shown verbatim, cost included (contract D)", () => {
  const r = { applied: true, response: 'x', edits: 1, conversation: { path: '/c', fileId: '1' }, tokens: { input: 1, output: 1, cost: 0.0123 }, message: 'applied 1 edit to calc.py · 2 turns · 1,234 tokens · $0.0123' };
  assert.deepEqual(editNotice(r), { level: 'info', message: 'nagent: applied 1 edit to calc.py · 2 turns · 1,234 tokens · $0.0123' });
  assert.equal(editNotice({ ...r, applied: false, reason: 'conflict', message: 'nagent: kept as a proposal' }).level, 'warning');
});

test('warnings (coupling, recent fixes) and a streaming marker in the Markdown', () => {
  const md = answerMarkdown({ kind: 'Edit', file: '/w/calc.py', response: 'partial', streaming: true, warnings: ['calc.py usually changes with tests/test_calc.py (62%, 21 of 34 commits); not touched'], time: t });
  assert.match(md, /… answering/);
  assert.match(md, /⚠ calc\.py usually changes with tests\/test\\_calc\.py \(62%, 21 of 34 commits\); not touched/);
});
