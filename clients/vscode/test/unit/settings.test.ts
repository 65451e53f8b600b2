import { strict as assert } from 'assert';
import { execFileSync } from 'child_process';
import { test } from 'node:test';
import * as manifest from '../../package.json';
import {
  clearedKeys,
  contributedProperties,
  explicitServerSettings,
  Inspection,
  nest,
  sectionValue,
  serverSettingKeys,
} from '../../src/pure/settings';

/** DESIGN §4 settings and the server's defaults (server/nagent_lsp/settings.py). */
const SERVER_DEFAULTS: Record<string, unknown> = {
  model: 'gpt-4.1-mini',
  baseUrl: '',
  apiKeyEnv: 'OPENAI_API_KEY',
  temperature: 0.2,
  maxOutputTokens: 8192,
  requestTimeout: 120,
  requestDeadline: 1800,
  commitSummaryMaxTokens: 1200,
  fileSummaryMaxTokens: 400,
  memoryMaxTokens: 1500,
  compactionMaxTokens: 2000,
  maxSteps: 25,
  shell: 'ask',
  tools: {},
  mcpServers: {},
  shellTimeout: 120,
  denyRead: ['.env', '.env.*', '*.pem', '*.key', 'id_rsa*'],
  maxFileBytes: 52428800,
  confirmEdits: false,
  stateRoot: '',
  'history.maxCommits': 200,
  'history.maxChangesetFiles': 50,
  'history.summarize': true,
  'history.shareSummaries': 'off',
  'history.summaryConsent': 'ask',
  'history.coupling': true,
  'history.couplingMinRate': 0.45,
  'history.couplingMinCommits': 2,
  'history.recentFixDays': 30,
  models: {},
  summaryModel: '',
  writeScope: 'workspace',
  denyWrite: ['.git', '.git/**', '.gitattributes', '.gitmodules', '.nagent/**', '.env', '.env.*', '*.pem', '*.key', 'id_rsa*'],
  reviewAlways: [
    '.githooks/**',
    '.husky/**',
    '.pre-commit-config.yaml',
    'lefthook.yml',
    '.lefthook.yml',
    '.vscode/tasks.json',
    '.vscode/launch.json',
    '.vscode/settings.json',
    '.devcontainer/**',
    '.idea/**',
    '.envrc',
    '.dir-locals.el',
    '.nvim.lua',
    '.nvimrc',
    '.exrc',
    '.helix/**',
    '.zed/**',
    '.github/workflows/**',
    '.gitlab-ci.yml',
    '*.pth',
  ],
  'conversation.tokenBudget': 60000,
  'conversation.share': 'committed',
  'rulesFiles.agentsMd': true,
  'rulesFiles.claudeMd': true,
  'rulesFiles.claudeRules': true,
  'rulesFiles.copilot': true,
  'attribution.notes': 'ai',
};

/** The server's "unset" (null) is contributed as "" (the Settings UI cannot edit a nullable string). */
const unsetAsEmpty = (v: unknown) => (v === null ? '' : v);

test('no setting has a union type (the Settings UI shows those as "Edit in settings.json" only)', () => {
  for (const [key, p] of Object.entries(contributedProperties())) assert.ok(!Array.isArray(p.type), `${key}: ${JSON.stringify(p.type)}`);
});

test('every server setting of DESIGN §4 is contributed, with type, default and description', () => {
  const props = contributedProperties();
  assert.deepEqual(serverSettingKeys().sort(), Object.keys(SERVER_DEFAULTS).sort());
  for (const key of Object.keys(SERVER_DEFAULTS)) {
    const p = props[`nagent.${key}`];
    assert.ok(p, `nagent.${key} missing`);
    assert.ok(p.type, `nagent.${key} has no type`);
    assert.ok('default' in p, `nagent.${key} has no default`);
    assert.ok((p.description ?? p.markdownDescription ?? '').length > 10, `nagent.${key} has no description`);
    assert.deepEqual(p.default, SERVER_DEFAULTS[key], `nagent.${key} default differs from the server's`);
  }
  assert.deepEqual(props['nagent.shell'].enum, ['allow', 'ask', 'deny']);
});

test('client-only launch settings exist and are not server settings', () => {
  const props = contributedProperties();
  assert.equal(props['nagent.server.command'].type, 'array');
  assert.equal(props['nagent.server.python'].type, 'string');
  assert.ok(!serverSettingKeys().some((k) => k.startsWith('server')));
});

test('contributed defaults agree with the real server (NAGENT_LSP_PYTHON)', (t) => {
  const python = process.env.NAGENT_LSP_PYTHON;
  if (!python) return t.skip('NAGENT_LSP_PYTHON not set');
  const out = execFileSync(python, ['-c', 'import json; from nagent_lsp.config.settings import Settings; print(json.dumps(Settings().public()))'], {
    encoding: 'utf8',
  });
  const server = JSON.parse(out) as Record<string, unknown>;
  const flat: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(server)) {
    if (k === 'history' || k === 'conversation' || k === 'rulesFiles' || k === 'attribution') for (const [hk, hv] of Object.entries(v as object)) flat[`${k}.${hk}`] = hv;
    else flat[k] = v;
  }
  assert.deepEqual(Object.keys(flat).sort(), serverSettingKeys().sort());
  const props = contributedProperties();
  for (const [k, v] of Object.entries(flat)) assert.deepEqual(props[`nagent.${k}`].default, unsetAsEmpty(v), `default of ${k}`);
});

function reader(values: Record<string, { value: unknown; explicit: boolean }>) {
  return {
    get: (k: string) => values[k]?.value,
    inspect: (k: string): Inspection | undefined =>
      values[k] ? (values[k].explicit ? { defaultValue: 'd', workspaceValue: values[k].value } : { defaultValue: values[k].value }) : undefined,
  };
}

test('only explicitly set server settings are sent, nested like the server expects', () => {
  const cfg = reader({
    model: { value: 'scripted', explicit: true },
    baseUrl: { value: 'http://127.0.0.1:9/v1', explicit: true },
    temperature: { value: 0.2, explicit: false },
    stateRoot: { value: '', explicit: true },
    apiKeyEnv: { value: null, explicit: true },
    'history.maxCommits': { value: 7, explicit: true },
    'history.summarize': { value: false, explicit: true },
    'server.command': { value: ['/x/nagent-lsp'], explicit: true },
  });
  assert.deepEqual(explicitServerSettings(cfg), {
    model: 'scripted',
    baseUrl: 'http://127.0.0.1:9/v1',
    history: { maxCommits: 7, summarize: false },
  });
});

test('nothing set → empty object (the server keeps its own layers)', () => {
  assert.deepEqual(explicitServerSettings(reader({})), {});
});

test('nest builds nested objects from dotted keys', () => {
  assert.deepEqual(nest({ a: 1, 'h.x': 2, 'h.y': 3, 'p.q.r': 4 }), { a: 1, h: { x: 2, y: 3 }, p: { q: { r: 4 } } });
});

test('sectionValue answers workspace/configuration sections', () => {
  const s = { model: 'm', history: { maxCommits: 3 } };
  assert.deepEqual(sectionValue(s, 'nagent'), s);
  assert.deepEqual(sectionValue(s, 'nagent.history'), { maxCommits: 3 });
  assert.equal(sectionValue(s, 'nagent.history.maxCommits'), 3);
  assert.equal(sectionValue(s, 'nagent.baseUrl'), null);
  assert.equal(sectionValue(s, 'python'), undefined);
});

test('manifest declares no extensionDependencies (the Python extension is optional)', () => {
  assert.equal((manifest as Record<string, unknown>).extensionDependencies, undefined);
});

test('a setting sent at start and cleared since is reported (the server needs a restart to drop it)', () => {
  assert.deepEqual(clearedKeys({ baseUrl: 'u', history: { maxCommits: 5 } }, { history: { maxCommits: 6 } }), ['baseUrl']);
  assert.deepEqual(clearedKeys({ models: { a: { model: 'x' } } }, { models: {} }), []);
  assert.deepEqual(clearedKeys({}, { model: 'm' }), []);
});
