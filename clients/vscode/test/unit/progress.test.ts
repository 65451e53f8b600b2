// $/progress as cancellable notifications (src/progress.ts) through a stub of the editor seam.
import { seam } from './seam';
import { strict as assert } from 'assert';
import { test } from 'node:test';
import { NotificationProgress } from '../../src/progress';

interface Shown {
  options: { location: unknown; title: string; cancellable: boolean };
  reports: { message?: string; increment?: number }[];
  cancel: () => void;
  /** Run the task now (VS Code may call it later than withProgress returns). */
  start: () => void;
  done: Promise<unknown> | undefined;
}

function stubWithProgress(deferred = false): Shown[] {
  const shown: Shown[] = [];
  seam.ProgressLocation = { SourceControl: 1, Window: 10, Notification: 15 };
  seam.withProgress = (options: Shown['options'], task: (p: unknown, ct: unknown) => Promise<unknown>) => {
    const listeners: (() => void)[] = [];
    const entry: Shown = {
      options,
      reports: [],
      cancel: () => listeners.forEach((l) => l()),
      start: () => {
        entry.done = task({ report: (v: { message?: string; increment?: number }) => entry.reports.push(v) }, { onCancellationRequested: (l: () => void) => listeners.push(l) });
      },
      done: undefined,
    };
    shown.push(entry);
    if (!deferred) entry.start();
    return Promise.resolve();
  };
  return shown;
}

async function settled(p: Promise<unknown> | undefined): Promise<boolean> {
  let done = false;
  void p?.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

test('begin opens a notification titled "nagent: …"; reports become increments; end closes it', async () => {
  const shown = stubWithProgress();
  const np = new NotificationProgress(() => assert.fail('nothing was cancelled'));
  np.handle('t1', { kind: 'begin', title: 'Editing app.py', cancellable: true, percentage: 0 });
  assert.equal(shown.length, 1);
  assert.deepEqual(shown[0].options, { location: 15, title: 'nagent: Editing app.py', cancellable: true });
  np.handle('t1', { kind: 'report', message: 'turn 1', percentage: 30 });
  np.handle('t1', { kind: 'report', message: 'turn 2', percentage: 20 }); // never backwards
  np.handle('t1', { kind: 'report', message: 'turn 3', percentage: 80 });
  assert.deepEqual(shown[0].reports, [
    { message: undefined, increment: undefined },
    { message: 'turn 1', increment: 30 },
    { message: 'turn 2', increment: undefined },
    { message: 'turn 3', increment: 50 },
  ]);
  assert.equal(await settled(shown[0].done), false);
  np.handle('t1', { kind: 'end' });
  assert.equal(await settled(shown[0].done), true);
});

test('a title that already names nagent is kept; a second begin for the same token is ignored', () => {
  const shown = stubWithProgress();
  const np = new NotificationProgress(() => undefined);
  np.handle(7, { kind: 'begin', title: 'nagent: summarizing', cancellable: false });
  np.handle(7, { kind: 'begin', title: 'again' });
  assert.equal(shown.length, 1);
  assert.equal(shown[0].options.title, 'nagent: summarizing');
  assert.equal(shown[0].options.cancellable, false);
});

test('reports that arrive before VS Code runs the task are applied in order; an end before it closes at once', async () => {
  const shown = stubWithProgress(true);
  const np = new NotificationProgress(() => undefined);
  np.handle('a', { kind: 'begin', title: 'Edit', percentage: 10 });
  np.handle('a', { kind: 'report', message: 'm1', percentage: 40 });
  np.handle('a', { kind: 'report', message: 'm2' });
  shown[0].start();
  assert.deepEqual(shown[0].reports, [
    { message: undefined, increment: 10 },
    { message: 'm1', increment: 30 },
    { message: 'm2', increment: undefined },
  ]);
  np.handle('b', { kind: 'begin', title: 'Other' });
  np.handle('b', { kind: 'end' });
  shown[1].start();
  assert.equal(await settled(shown[1].done), true);
  // reports and ends of unknown tokens are ignored
  np.handle('zzz', { kind: 'report', message: 'x' });
  np.handle('zzz', { kind: 'end' });
});

test('Cancel sends the token to the server, but not after the run ended', () => {
  const shown = stubWithProgress();
  const cancelled: unknown[] = [];
  const np = new NotificationProgress((token) => cancelled.push(token));
  np.handle('run-1', { kind: 'begin', title: 'Edit', cancellable: true });
  shown[0].cancel();
  assert.deepEqual(cancelled, ['run-1']);
  np.handle('run-2', { kind: 'begin', title: 'Edit', cancellable: true });
  np.handle('run-2', { kind: 'end' });
  shown[1].cancel();
  assert.deepEqual(cancelled, ['run-1']);
});

test('dispose closes every open notification', async () => {
  const shown = stubWithProgress();
  const np = new NotificationProgress(() => undefined);
  np.handle('x', { kind: 'begin', title: 'one' });
  np.handle('y', { kind: 'begin', title: 'two' });
  np.dispose();
  assert.equal(await settled(shown[0].done), true);
  assert.equal(await settled(shown[1].done), true);
});
