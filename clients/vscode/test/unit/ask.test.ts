// The server's questions (window/showMessageRequest) as modal dialogs through a stub of the editor seam.
import { seam } from './seam';
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { askModal } from '../../src/ask';

test('a question with actions is a modal that waits for the answer; the chosen action is returned', async () => {
  const calls: { kind: string; message: string; items: string[] }[] = [];
  seam.showModalInformation = async (message: string, ...items: string[]) => {
    calls.push({ kind: 'modal-info', message, items });
    return 'Run';
  };
  seam.showModalWarning = async (message: string, ...items: string[]) => {
    calls.push({ kind: 'modal-warning', message, items });
    return undefined; // dismissed (Escape / Cancel)
  };
  seam.showInformationMessage = async () => assert.fail('a question must not be a toast (it hides after a while)');
  const run = await askModal({ type: 3, message: 'Run `pytest -q` in /ws?', actions: [{ title: 'Run' }, { title: 'Deny' }] });
  assert.deepEqual(run, { title: 'Run' });
  assert.deepEqual(calls[0], { kind: 'modal-info', message: 'nagent: Run `pytest -q` in /ws?', items: ['Run', 'Deny'] });
  const dismissed = await askModal({ type: 2, message: 'nagent: write outside?', actions: [{ title: 'Allow' }] });
  assert.equal(dismissed, null);
  assert.equal(calls[1].kind, 'modal-warning');
  assert.equal(calls[1].message, 'nagent: write outside?');
});

test('a message without actions is an ordinary notification answered with null', async () => {
  const shown: string[] = [];
  seam.showWarningMessage = async (m: string) => {
    shown.push(m);
    return undefined;
  };
  assert.equal(await askModal({ type: 2, message: 'careful' }), null);
  assert.deepEqual(shown, ['nagent: careful']);
});
