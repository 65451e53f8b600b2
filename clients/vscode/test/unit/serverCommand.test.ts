import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { test } from 'node:test';
import { describeLaunch, findOnPath, ResolveInput, resolveServer } from '../../src/pure/serverCommand';

function input(over: Partial<ResolveInput> = {}): ResolveInput & { probed: string[] } {
  const probed: string[] = [];
  return {
    command: [],
    python: '',
    pythonExtensionInterpreter: async () => undefined,
    probeModule: async (p) => {
      probed.push(p);
      return undefined;
    },
    findOnPath: () => undefined,
    ...over,
    probed,
  };
}

test('1. nagent.server.command wins and is used verbatim', async () => {
  const i = input({ command: ['/opt/venv/bin/nagent-lsp', '--log', 'x'], python: '/usr/bin/python3', findOnPath: () => '/usr/bin/nagent-lsp' });
  const r = await resolveServer(i);
  assert.ok(r.ok);
  assert.deepEqual(r.launch, { command: '/opt/venv/bin/nagent-lsp', args: ['--log', 'x'], source: 'nagent.server.command' });
  assert.deepEqual(i.probed, []);
});

test('2. nagent.server.python → python -m nagent_lsp, after checking the module imports', async () => {
  const i = input({ python: '/venv/bin/python', pythonExtensionInterpreter: async () => '/other/python' });
  const r = await resolveServer(i);
  assert.ok(r.ok);
  assert.deepEqual(r.launch, { command: '/venv/bin/python', args: ['-m', 'nagent_lsp'], source: 'nagent.server.python' });
  assert.deepEqual(i.probed, ['/venv/bin/python']);
});

test('2b. an explicit python without nagent_lsp is an error naming the fix, no silent fallback', async () => {
  const r = await resolveServer(input({ python: '/venv/bin/python', probeModule: async () => "No module named 'nagent_lsp'", findOnPath: () => '/usr/bin/nagent-lsp' }));
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.match(r.message, /nagent\.server\.python/);
    assert.match(r.message, /-m pip install \/path\/to\/nagent-lsp/);
    assert.match(r.message, /No module named/);
  }
});

test('3. the Python extension interpreter is used when it has nagent_lsp', async () => {
  const r = await resolveServer(input({ pythonExtensionInterpreter: async () => '/ext/python', findOnPath: () => '/usr/bin/nagent-lsp' }));
  assert.ok(r.ok);
  assert.equal(r.launch.source, 'python-extension');
  assert.deepEqual([r.launch.command, ...r.launch.args], ['/ext/python', '-m', 'nagent_lsp']);
});

test('3b. a Python extension interpreter without nagent_lsp falls through to PATH', async () => {
  const r = await resolveServer(
    input({ pythonExtensionInterpreter: async () => '/ext/python', probeModule: async () => 'missing', findOnPath: (n) => `/usr/local/bin/${n}` }),
  );
  assert.ok(r.ok);
  assert.deepEqual(r.launch, { command: '/usr/local/bin/nagent-lsp', args: [], source: 'PATH' });
  assert.ok(r.notes.some((n) => n.includes('/ext/python')));
});

test('3c. a failing Python extension API is a note, not a failure', async () => {
  const r = await resolveServer(input({ pythonExtensionInterpreter: async () => Promise.reject(new Error('boom')), findOnPath: () => '/b/nagent-lsp' }));
  assert.ok(r.ok);
  assert.equal(r.launch.source, 'PATH');
  assert.ok(r.notes.some((n) => n.includes('boom')));
});

test('4. nothing found → a clear error explaining how to install', async () => {
  const r = await resolveServer(input());
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.match(r.message, /pipx install \/path\/to\/nagent-lsp/);
    assert.match(r.message, /nagent\.server\.command/);
  }
});

test('empty argv entries do not count as a command', async () => {
  const r = await resolveServer(input({ command: [''], findOnPath: () => '/b/nagent-lsp' }));
  assert.ok(r.ok);
  assert.equal(r.launch.source, 'PATH');
});

test('findOnPath finds only executable files, in PATH order', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'nagent-path-'));
  try {
    const a = path.join(root, 'a');
    const b = path.join(root, 'b');
    const c = path.join(root, 'c');
    for (const d of [a, b, c]) fs.mkdirSync(d);
    fs.writeFileSync(path.join(a, 'nagent-lsp'), '#!/bin/sh\n', { mode: 0o644 }); // not executable
    fs.mkdirSync(path.join(b, 'nagent-lsp')); // a directory
    fs.writeFileSync(path.join(c, 'nagent-lsp'), '#!/bin/sh\n', { mode: 0o755 });
    const envPath = [a, '', b, c].join(':');
    assert.equal(findOnPath('nagent-lsp', envPath), path.join(c, 'nagent-lsp'));
    assert.equal(findOnPath('nagent-lsp', [a, b].join(':')), undefined);
    assert.equal(findOnPath('nagent-lsp', undefined), undefined);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('describeLaunch quotes arguments with spaces', () => {
  assert.equal(describeLaunch({ command: '/a b/python', args: ['-m', 'nagent_lsp'], source: 'nagent.server.python' }), '"/a b/python" -m nagent_lsp (from nagent.server.python)');
});

test('1b. a nagent.server.command that does not exist falls back to the next way, with one warning (issue 25)', async () => {
  const i = input({ command: ['/nope/bin/nagent-lsp'], isExecutable: () => false, findOnPath: (n) => (n === 'nagent-lsp' ? '/usr/bin/nagent-lsp' : undefined) });
  const r = await resolveServer(i);
  assert.ok(r.ok, JSON.stringify(r));
  assert.deepEqual(r.launch, { command: '/usr/bin/nagent-lsp', args: [], source: 'PATH' });
  assert.match(r.warning ?? '', /nagent\.server\.command names "\/nope\/bin\/nagent-lsp", which is not an executable file; started the server from PATH/);
  // a bare name is looked up on PATH
  const bare = await resolveServer(input({ command: ['no-such-lsp', '--x'], isExecutable: () => true, findOnPath: () => undefined, python: '' }));
  assert.ok(!bare.ok);
  assert.match(bare.message, /"no-such-lsp", which is not an executable file on PATH, and no other server was found/);
  // an existing command is used as given, without a warning
  const good = await resolveServer(input({ command: ['/ok/nagent-lsp'], isExecutable: (p) => p === '/ok/nagent-lsp' }));
  assert.ok(good.ok && good.launch.source === 'nagent.server.command' && good.warning === undefined);
});
