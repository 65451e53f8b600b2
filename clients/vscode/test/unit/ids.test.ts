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
    // nagent.openAttribution: the client command the server's hover links name (contracts.md C); the server never advertises it
    if (id === Commands.openAttribution) continue;
    assert.ok(id.startsWith('nagent.vscode.'), `${id} must live under nagent.vscode.`);
    assert.ok(!server.has(id), `${id} is also a server command`);
  }
});

test('menus only reference contributed commands; the editor context menu has a "nagent" submenu with the edit commands', () => {
  const menus = manifest.contributes.menus as unknown as Record<string, { command?: string; submenu?: string }[]>;
  const submenus = (manifest.contributes.submenus ?? []).map((s) => s.id);
  for (const entries of Object.values(menus)) {
    for (const e of entries) {
      if (e.submenu) assert.ok(submenus.includes(e.submenu), e.submenu);
      else assert.ok(e.command && contributed.includes(e.command), e.command);
    }
  }
  const sub = menus['editor/context'].find((e) => e.submenu)?.submenu;
  assert.ok(sub, 'no submenu in the editor context menu');
  assert.equal(manifest.contributes.submenus.find((s) => s.id === sub)?.label, 'nagent');
  const inSub = menus[sub].map((e) => e.command);
  for (const c of [Commands.editSelection, Commands.editFile, Commands.editWithAgent, Commands.runRecipe]) assert.ok(inSub.includes(c), c);
});

test('keybindings name contributed commands', () => {
  const keys = manifest.contributes.keybindings;
  assert.ok(keys.length >= 5);
  for (const k of keys) assert.ok(contributed.includes(k.command), k.command);
  assert.ok(keys.some((k) => k.command === Commands.editSelection));
  assert.ok(keys.some((k) => k.command === Commands.sendFromConversation && /nagent-conversation/.test(k.when ?? '')));
});

test('the conversation language covers conversation files, not the file index', () => {
  const lang = manifest.contributes.languages.find((l) => l.id === 'nagent-conversation');
  assert.ok(lang);
  assert.ok(manifest.contributes.grammars.some((g) => g.language === 'nagent-conversation'));
});

test('commands carry the palette titles the docs and the e2e test use', () => {
  const title = (id: string) => manifest.contributes.commands.find((c) => c.command === id);
  assert.equal(title(Commands.editSelection)?.title, 'Edit Selection…');
  assert.equal(title(Commands.openConversation)?.title, 'Open File Conversation');
  for (const c of manifest.contributes.commands) assert.equal(c.category, 'nagent');
});

test('one hunk has a keyboard path: accept/reject the change at the cursor (issue 25)', () => {
  const keys = manifest.contributes.keybindings;
  for (const c of [Commands.acceptHunkAtCursor, Commands.rejectHunkAtCursor]) {
    const k = keys.find((x) => x.command === c);
    assert.ok(k, `no keybinding for ${c}`);
    assert.match(k.when ?? '', /nagent\.(inline)?[rR]eviewPending/);
  }
});

test('the conversation commands (save, load, compact, summarize, list) are in the command palette (issue 25)', () => {
  const hidden = new Set(((manifest.contributes.menus as unknown as Record<string, { command?: string; when?: string }[]>).commandPalette ?? []).filter((e) => e.when === 'false').map((e) => e.command));
  for (const c of [Commands.conversationSave, Commands.conversationLoad, Commands.conversationCompact, Commands.conversationSummarize, Commands.conversationList]) {
    assert.ok(contributed.includes(c), c);
    assert.ok(!hidden.has(c), `${c} is hidden from the palette`);
  }
});
