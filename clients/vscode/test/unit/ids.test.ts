import { strict as assert } from 'assert';
import { test } from 'node:test';
import * as manifest from '../../package.json';
import { Commands } from '../../src/pure/ids';
import { ServerCommands } from '../../src/pure/protocol';

const contributed = manifest.contributes.commands.map((c) => c.command);

test('every extension command is contributed and every contributed command is implemented', () => {
  assert.deepEqual([...contributed].sort(), Object.values(Commands).sort());
});

test('extension command ids never collide with server command ids (client start would fail)', () => {
  const server = new Set<string>(Object.values(ServerCommands));
  for (const id of contributed) {
    assert.ok(id.startsWith('nagent.vscode.'), `${id} must live under nagent.vscode.`);
    assert.ok(!server.has(id), `${id} is also a server command`);
  }
});

test('menus only reference contributed commands; the edit commands are in the editor context menu', () => {
  const menus = manifest.contributes.menus as Record<string, { command: string }[]>;
  for (const entries of Object.values(menus)) for (const e of entries) assert.ok(contributed.includes(e.command), e.command);
  const ctx = menus['editor/context'].map((e) => e.command);
  assert.ok(ctx.includes(Commands.editSelection));
  assert.ok(ctx.includes(Commands.editFile));
});

test('commands carry the palette titles the docs and the e2e test use', () => {
  const title = (id: string) => manifest.contributes.commands.find((c) => c.command === id);
  assert.equal(title(Commands.editSelection)?.title, 'Edit Selection…');
  assert.equal(title(Commands.openConversation)?.title, 'Open File Conversation');
  for (const c of manifest.contributes.commands) assert.equal(c.category, 'nagent');
});
