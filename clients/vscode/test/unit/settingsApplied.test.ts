import { strict as assert } from 'assert';
import { test } from 'node:test';
import { changedScalars, settingsApplied, valueAt } from '../../src/pure/settings';

test('changedScalars: the scalar values a didChangeConfiguration changes (dotted keys)', () => {
  const before = { model: 'fake', history: { maxCommits: 5 }, denyRead: ['.env'] };
  const after = { model: 'other', history: { maxCommits: 5, summarize: false }, denyRead: ['.env', '*.pem'] };
  assert.deepEqual(changedScalars(before, after), { model: 'other', 'history.summarize': false });
  assert.deepEqual(changedScalars(after, after), {});
});

test('settingsApplied: the status asked right after the notification still has the old model (issue 25 #8)', () => {
  const expected = { model: 'scripted-e2e-model-renamed' };
  assert.equal(settingsApplied(expected, { model: 'fake', history: {} }), false);
  assert.equal(settingsApplied(expected, undefined), false);
  assert.equal(settingsApplied(expected, { model: 'scripted-e2e-model-renamed' }), true);
  assert.equal(settingsApplied({ 'history.maxCommits': 9 }, { history: { maxCommits: 9 } }), true);
  assert.equal(settingsApplied({}, { model: 'x' }), true);
  assert.equal(valueAt({ a: { b: 1 } }, 'a.c'), undefined);
});
