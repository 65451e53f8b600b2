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
  assert.equal(end?.key, 'stream:file:///w/calc.py');
  // another file streams on its own
  assert.equal(s.apply({ token: null, uri: 'file:///w/b.py', delta: 'x', turn: 1 })?.text, 'x');
  assert.equal(s.get(uri)?.text, 'Fixed');
  assert.equal(s.take(uri), 'stream:file:///w/calc.py');
  assert.equal(s.take(uri), undefined);
  assert.equal(s.apply({ uri } as never), undefined);
});
