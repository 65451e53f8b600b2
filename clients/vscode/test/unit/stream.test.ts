import { strict as assert } from 'assert';
import { test } from 'node:test';
import { StreamAnswers } from '../../src/pure/stream';

const uri = 'file:///w/calc.py';

test('deltas accumulate per run; a new turn starts fresh; done ends the reply', () => {
  const s = new StreamAnswers();
  assert.equal(s.apply({ token: 't', uri, delta: 'Renamed ', turn: 1 })?.text, 'Renamed ');
  const a = s.apply({ token: 't', uri, delta: 'greet.', turn: 1 });
  assert.equal(a?.text, 'Renamed greet.');
  assert.equal(a?.done, false);
  // a correction: the latest reply's text only
  assert.equal(s.apply({ token: 't', uri, delta: 'Fixed', turn: 2 })?.text, 'Fixed');
  const end = s.apply({ token: 't', uri, delta: '', turn: 2, done: true });
  assert.equal(end?.text, 'Fixed');
  assert.equal(end?.done, true);
  assert.match(end?.key ?? '', /^stream:file:\/\/\/w\/calc\.py#\d+$/);
  assert.equal(end?.key, a?.key, 'a correction of the same run stays in the run\'s entry');
  // another file streams on its own
  assert.equal(s.apply({ token: null, uri: 'file:///w/b.py', delta: 'x', turn: 1 })?.text, 'x');
  assert.equal(s.get(uri)?.text, 'Fixed');
  assert.equal(s.take(uri), end?.key);
  assert.equal(s.take(uri), undefined);
  // the next run on the same file (after take) gets an entry of its own; its turns share it
  const next = s.apply({ token: 't2', uri, delta: 'two', turn: 1 });
  assert.notEqual(next?.key, end?.key);
  s.apply({ token: 't2', uri, delta: '', turn: 1, done: true });
  const turn2 = s.apply({ token: 't2', uri, delta: 'three', turn: 2 });
  assert.equal(turn2?.key, next?.key);
  assert.equal(turn2?.text, 'three');
  assert.equal(s.apply({ uri } as never), undefined);
});
