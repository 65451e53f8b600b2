// The status bar item through a stub of the editor seam (test/unit/seam.ts): the texts a user sees.
import { seam, fakeStatusBarItem, FakeStatusBarItem } from './seam';
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { StatusBar } from '../../src/statusBar';
import { Commands } from '../../src/pure/ids';

const created: FakeStatusBarItem[] = [];
seam.StatusBarAlignment = { Left: 1, Right: 2 };
seam.createStatusBarItem = (id: string, alignment: unknown, priority: number) => {
  const item = fakeStatusBarItem(id, alignment, priority);
  created.push(item);
  return item;
};

function newBar(): { bar: StatusBar; item: FakeStatusBarItem } {
  const bar = new StatusBar();
  return { bar, item: created[created.length - 1] };
}

test('the item is created on the right, named, and opens Show Status', () => {
  const { item } = newBar();
  assert.equal(item.id, 'nagent.status');
  assert.equal(item.alignment, 2);
  assert.equal(item.priority, 100);
  assert.equal(item.name, 'nagent');
  assert.equal(item.command, Commands.showStatus);
});

test('server states', () => {
  const { bar, item } = newBar();
  bar.update({ state: 'stopped', configured: true });
  assert.equal(item.text, '$(circle-slash) nagent');
  assert.equal(item.visible, true);
  bar.update({ state: 'starting', configured: true });
  assert.equal(item.text, '$(sync~spin) nagent');
  bar.update({ state: 'failed', configured: true });
  assert.equal(item.text, '$(error) nagent');
  bar.update({ state: 'running', model: 'gpt-x', configured: true });
  assert.equal(item.text, '$(hubot) gpt-x');
  assert.equal(bar.text, item.text);
  bar.update({ state: 'running', model: 'gpt-x', configured: false });
  assert.equal(item.text, '$(hubot) gpt-x (not configured)');
  assert.match(String(item.tooltip), /no API key or base URL configured/);
});

test('the last run: tokens and, with a priced profile, its cost', () => {
  const { bar, item } = newBar();
  bar.update({ state: 'running', model: 'scripted', configured: true });
  bar.noteTokens({ input: 2700, output: 360, turns: 2 });
  assert.equal(item.text, '$(hubot) scripted · 2.7k↑ 360↓');
  bar.noteTokens({ input: 2700, output: 360, turns: 2, cost: 0.00342 });
  assert.equal(item.text, '$(hubot) scripted · 2.7k↑ 360↓ · $0.0034');
  assert.match(String(item.tooltip), /Last run: .*cost \$0\.0034/);
  assert.equal(bar.lastTokens?.cost, 0.00342);
  // a run that spent nothing (cancelled before the first model call) keeps the previous figures
  bar.noteTokens({ input: 0, output: 0 });
  bar.noteTokens(undefined);
  assert.equal(item.text, '$(hubot) scripted · 2.7k↑ 360↓ · $0.0034');
  // an unpriced run shows no cost
  bar.noteTokens({ input: 12_345, output: 678, cost: null });
  assert.equal(item.text, '$(hubot) scripted · 12k↑ 678↓');
});

test('runs in flight spin, one label or a count, and the last tokens come back after', async () => {
  const { bar, item } = newBar();
  bar.update({ state: 'running', model: 'm', configured: true });
  bar.noteTokens({ input: 100, output: 20, cost: 1.5 });
  let release1!: () => void;
  let release2!: () => void;
  const run1 = bar.working('editing app.py', () => new Promise<string>((r) => (release1 = () => r('one'))));
  assert.equal(item.text, '$(sync~spin) m · editing app.py');
  assert.match(String(item.tooltip), /Cancel it from its progress notification/);
  const run2 = bar.working('recipe explain', () => new Promise<void>((_r, reject) => (release2 = () => reject(new Error('boom')))));
  assert.equal(item.text, '$(sync~spin) m · 2 runs');
  release1();
  assert.equal(await run1, 'one');
  assert.equal(item.text, '$(sync~spin) m · recipe explain');
  release2();
  await assert.rejects(run2, /boom/);
  assert.equal(item.text, '$(hubot) m · 100↑ 20↓ · $1.50');
});

test('a run shows only while the server runs; dispose disposes the item', () => {
  const { bar, item } = newBar();
  bar.update({ state: 'starting', configured: true });
  void bar.working('editing x', () => new Promise(() => undefined));
  assert.equal(item.text, '$(sync~spin) nagent');
  bar.dispose();
  assert.equal(item.disposed, true);
});
