// The conversation editor through a stub of the editor seam (test/unit/seam.ts): issue 25 #3, the cursor
// must stay where the user edits an earlier turn; a reload while a run appends still follows the end.
import { seam } from './seam';
import { strict as assert } from 'assert';
import { test } from 'node:test';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ConversationSupport } from '../../src/conversation';

interface Pos {
  line: number;
  character: number;
}
type Listener = (e: unknown) => void;

/** `onDisk`: the conversation file holds the buffer's text (a reload), or other text (the user typed). */
function fixture(lines: number, cursorLine: number, onDisk: 'same' | 'other' = 'other') {
  const listeners: Record<string, Listener[]> = {};
  const on = (name: string) => (l: Listener) => {
    (listeners[name] ??= []).push(l);
    return { dispose: () => undefined };
  };
  const text = Array.from({ length: lines }, (_, i) => `line ${i}`).join('\n');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'nagent-conv-')), 'app.py-0b0e2d3c-1111-4222-8333-944445555666');
  fs.writeFileSync(file, onDisk === 'same' ? text : text + '\ntyped by the user');
  const doc = {
    uri: { scheme: 'nagent-conversation', fsPath: file, toString: () => `nagent-conversation:${file}` },
    languageId: 'nagent-conversation',
    isDirty: false,
    isClosed: false,
    lineCount: lines,
    getText: () => text,
    lineAt: (n: number) => ({ range: { end: { line: n, character: `line ${n}`.length } } }),
  };
  const editor = { document: doc, selection: { active: { line: cursorLine, character: 2 } as Pos }, revealed: 0, revealRange: () => editor.revealed++ };
  Object.assign(seam, {
    registerFoldingRangeProvider: () => ({ dispose: () => undefined }),
    registerCodeLensProvider: () => ({ dispose: () => undefined }),
    registerFileSystemProvider: () => ({ dispose: () => undefined }),
    EventEmitter: class {
      event = () => ({ dispose: () => undefined });
      fire(): void {}
      dispose(): void {}
    },
    onDidOpenTextDocument: on('open'),
    onDidChangeActiveTextEditor: on('active'),
    onDidCloseTextDocument: on('close'),
    onDidChangeTextDocument: on('change'),
    textDocuments: () => [],
    visibleEditors: () => [editor],
    activeEditor: () => editor,
    commands: { execute: async () => undefined },
    Selection: class {
      active: Pos;
      constructor(a: Pos) {
        this.active = a;
      }
    },
    Range: class {
      constructor(
        readonly start: Pos,
        readonly end: Pos,
      ) {}
    },
    TextEditorRevealType: { InCenterIfOutsideViewport: 2 },
  });
  const log = { warn: () => undefined, info: () => undefined };
  const support = new ConversationSupport(log as never);
  const change = (dirty: boolean) => {
    doc.isDirty = dirty;
    for (const l of listeners.change ?? []) l({ document: doc, contentChanges: [{ text: 'x' }] });
  };
  return { support, editor, change };
}

test("the user's edit of an earlier turn leaves the cursor there (clean buffer: autosave, or the first keystroke)", (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { support, editor, change } = fixture(40, 5);
  change(false);
  t.mock.timers.tick(1000);
  assert.equal(editor.selection.active.line, 5, 'the cursor jumped away from the edited line');
  assert.equal(editor.revealed, 0);
  change(true);
  t.mock.timers.tick(1000);
  assert.equal(editor.selection.active.line, 5);
  support.dispose();
});

/** Let the handler's file read finish (real I/O; setTimeout is mocked). */
async function settle(): Promise<void> {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
  await new Promise<void>((r) => fs.stat(os.tmpdir(), () => r()));
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
}

test('a reload from disk while a run is in flight follows the end of the conversation', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { support, editor, change } = fixture(40, 5, 'same');
  let release!: () => void;
  const run = support.withSync(() => new Promise<void>((r) => (release = r)));
  await Promise.resolve();
  change(false);
  t.mock.timers.tick(1000);
  await settle();
  assert.equal(editor.selection.active.line, 39, 'the reload during a run did not go to the end');
  release();
  await run;
  support.dispose();
});

test('typing at the end — or anywhere during a run — never moves the cursor (the first keystroke is reported clean)', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const atEnd = fixture(40, 39);
  atEnd.editor.selection.active.character = 2;
  atEnd.change(false);
  t.mock.timers.tick(1000);
  await settle();
  assert.equal(atEnd.editor.revealed, 0, 'typing at the end moved the selection (the next characters land elsewhere)');
  assert.equal(atEnd.editor.selection.active.character, 2);
  atEnd.support.dispose();
  const during = fixture(40, 7, 'other');
  let release!: () => void;
  const run = during.support.withSync(() => new Promise<void>((r) => (release = r)));
  await Promise.resolve();
  during.change(false);
  t.mock.timers.tick(1000);
  await settle();
  assert.equal(during.editor.selection.active.line, 7, 'typing during a run moved the cursor');
  release();
  await run;
  during.support.dispose();
});
