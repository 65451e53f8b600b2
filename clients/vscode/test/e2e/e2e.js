// @ts-check
/**
 * End-to-end test of the packaged extension in a real VS Code (code-server 4.100.3), driven through
 * its UI by Debian's Chromium with playwright-core.
 *
 * It builds a real git repository, starts the fake OpenAI server (tests/harness/fake_openai.py) with
 * scripted replies, installs the .vsix into a fresh code-server profile whose user settings point the
 * extension at the real nagent-lsp and the fake model, opens the workspace in the browser, and runs the
 * extension's commands from the F1 command palette. Assertions read the JSON lines the extension
 * writes when NAGENT_VSCODE_TEST_REPORT is set (command results, document text, hovers), plus a few
 * DOM checks (hover widget, status bar, tabs). Chromium provides the browser and the gestures only.
 *
 * Environment:
 *   NAGENT_CS_BIN          code-server executable (required; see install-code-server.sh)
 *   NAGENT_VSIX            the packaged extension (required)
 *   NAGENT_LSP_COMMAND     server argv as JSON array, or a path (default <repo>/.venv/bin/nagent-lsp)
 *   NAGENT_PYTHON          Python that runs tests/harness/fake_openai.py (default <repo>/.venv/bin/python)
 *   NAGENT_REPO_ROOT       repository root (default: four levels up from this file)
 *   NAGENT_E2E_ARTIFACTS   folder for screenshots and logs (default: a temp folder, kept on failure)
 *   NAGENT_E2E_ALLOW_MISSING=1  skip (instead of fail) steps whose server command is not registered yet
 *   CHROMIUM               browser executable (default /usr/bin/chromium)
 */
'use strict';
const cp = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');

const REPO = path.resolve(process.env.NAGENT_REPO_ROOT || path.join(__dirname, '..', '..', '..', '..'));
const CS_BIN = mustEnv('NAGENT_CS_BIN');
const VSIX = path.resolve(mustEnv('NAGENT_VSIX'));
const ALLOW_MISSING = process.env.NAGENT_E2E_ALLOW_MISSING === '1';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const MODEL = 'scripted-e2e-model';
const REQUEST = 'rename greet to welcome and use an f-string';
const SUMMARY = 'A tiny greeting module: welcome(name) greets a name and falls back to "world".';
const MODEL_2 = 'scripted-e2e-model-renamed';

function mustEnv(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
}

function serverArgv() {
  const raw = process.env.NAGENT_LSP_COMMAND;
  if (raw && raw.trim().startsWith('[')) return JSON.parse(raw);
  if (raw) return [raw];
  return [path.join(REPO, '.venv', 'bin', 'nagent-lsp')];
}

const pythonExe = process.env.NAGENT_PYTHON || (fs.existsSync(path.join(REPO, '.venv/bin/python')) ? path.join(REPO, '.venv/bin/python') : 'python3');

// ------------------------------------------------------------------------------------------------
// results

/** @type {{name: string, status: 'pass'|'fail'|'skip', detail?: string, ms: number}[]} */
const results = [];

async function step(name, fn, { needs } = /** @type {{needs?: string[]}} */ ({})) {
  const t0 = Date.now();
  if (needs) {
    const missing = needs.filter((c) => !ctx.serverCommands.includes(c) && !(c === 'hover' && ctx.hoverProvider));
    if (missing.length) {
      const detail = `server does not provide ${missing.join(', ')} yet`;
      if (ALLOW_MISSING) {
        results.push({ name, status: 'skip', detail, ms: 0 });
        console.log(`SKIP ${name}: ${detail}`);
        return;
      }
      results.push({ name, status: 'fail', detail, ms: 0 });
      console.log(`FAIL ${name}: ${detail}`);
      return;
    }
  }
  try {
    await fn();
    results.push({ name, status: 'pass', ms: Date.now() - t0 });
    console.log(`PASS ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    const detail = e && e.stack ? e.stack : String(e);
    results.push({ name, status: 'fail', detail, ms: Date.now() - t0 });
    console.log(`FAIL ${name} (${Date.now() - t0} ms)\n${indent(detail)}`);
    await shot(`fail-${name.replace(/\W+/g, '_')}`);
    await dismissOverlays();
  }
}

function assert(cond, msg, extra) {
  if (!cond) throw new Error(msg + (extra !== undefined ? `\n${indent(typeof extra === 'string' ? extra : JSON.stringify(extra, null, 2))}` : ''));
}

function indent(s) {
  return String(s)
    .split('\n')
    .map((l) => '    ' + l)
    .join('\n');
}

// ------------------------------------------------------------------------------------------------
// fixtures

const ctx = {
  tmp: '',
  ws: '',
  artifacts: '',
  report: '',
  record: '',
  baseUrl: '',
  /** @type {string[]} */ serverCommands: [],
  hoverProvider: false,
  /** @type {import('playwright-core').Page | undefined} */ page: undefined,
  /** @type {cp.ChildProcess[]} */ procs: [],
  reportIndex: 0,
};

const APP_V1 = 'def greet(name):\n    return "Hello, " + name\n';
const APP_V2 = 'def greet(name):\n    if not name:\n        name = "world"\n    return "Hello, " + name\n';
const APP_V3 = '"""Greetings."""\n\n\ndef greet(name):\n    """Say hello."""\n    if not name:\n        name = "world"\n    return "Hello, " + name\n\n\nprint(greet("e2e"))\n';
// What the scripted model writes: the whole file with greet renamed.
const APP_NEW = '"""Greetings."""\n\n\ndef welcome(name):\n    """Say hello."""\n    if not name:\n        name = "world"\n    return f"Hello, {name}"\n\n\nprint(welcome("e2e"))\n';
const APP_CONFIRMED = APP_NEW.replace('print(welcome("e2e"))', 'print(welcome("confirmed"))');

function git(args, env = {}) {
  return cp.execFileSync('git', args, { cwd: ctx.ws, encoding: 'utf8', env: { ...process.env, ...env } });
}

function commit(author, email, subject, date, files) {
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(ctx.ws, name)), { recursive: true });
    fs.writeFileSync(path.join(ctx.ws, name), text);
  }
  git(['add', '-A']);
  git(['commit', '-q', '-m', subject], {
    GIT_AUTHOR_NAME: author,
    GIT_AUTHOR_EMAIL: email,
    GIT_COMMITTER_NAME: author,
    GIT_COMMITTER_EMAIL: email,
    GIT_AUTHOR_DATE: date,
    GIT_COMMITTER_DATE: date,
  });
}

function makeRepository() {
  fs.mkdirSync(ctx.ws, { recursive: true });
  git(['init', '-q', '-b', 'main']);
  git(['config', 'user.name', 'e2e']);
  git(['config', 'user.email', 'e2e@example.invalid']);
  git(['config', 'commit.gpgsign', 'false']);
  commit('Alice Example', 'alice@example.invalid', 'Add greeting module', '2024-01-02T10:00:00Z', {
    'app.py': APP_V1,
    'util.py': 'def clean(s):\n    return s.strip()\n',
    'README.md': '# demo\n',
  });
  commit('Bob Example', 'bob@example.invalid', 'Handle empty names', '2024-02-03T11:00:00Z', {
    'app.py': APP_V2,
    'util.py': 'def clean(s):\n    return (s or "").strip()\n',
  });
  commit('Alice Example', 'alice@example.invalid', 'Document greet and add a demo call', '2024-03-04T12:00:00Z', { 'app.py': APP_V3 });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function startFakeModel() {
  const script = {
    replies: [
      { text: `I will rewrite the file.\n<nagent-write path="${path.join(ctx.ws, 'app.py')}">${APP_NEW}</nagent-write>`, usage: [1200, 340] },
      { text: '<nagent-response>Renamed greet to welcome and switched to an f-string.</nagent-response>', usage: [1500, 20] },
      // Summarize File
      { text: SUMMARY, usage: [300, 25] },
      // the run that is cancelled from its progress notification
      { delay: 30, text: '<nagent-response>this reply comes too late</nagent-response>' },
      // the edit confirmed in the refactor preview (nagent.confirmEdits)
      { text: `<nagent-write path="${path.join(ctx.ws, 'app.py')}">${APP_CONFIRMED}</nagent-write>` },
      { text: '<nagent-response>Changed the demo call.</nagent-response>' },
    ],
  };
  const scriptPath = path.join(ctx.tmp, 'model-script.json');
  fs.writeFileSync(scriptPath, JSON.stringify(script, null, 2));
  ctx.record = path.join(ctx.tmp, 'model-requests.jsonl');
  const proc = cp.spawn(pythonExe, ['-m', 'tests.harness.fake_openai', '--port', '0', '--script', scriptPath, '--record', ctx.record], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  ctx.procs.push(proc);
  const errLog = fs.createWriteStream(path.join(ctx.artifacts, 'fake-openai.log'));
  proc.stderr?.pipe(errLog);
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('fake_openai did not print its base URL within 20 s')), 20000);
    proc.on('exit', (code) => reject(new Error(`fake_openai exited early with ${code}; see ${path.join(ctx.artifacts, 'fake-openai.log')}`)));
    proc.stdout?.on('data', (d) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(buf.slice(0, nl).trim());
      }
    });
  });
}

function modelRequests() {
  if (!fs.existsSync(ctx.record)) return [];
  return fs
    .readFileSync(ctx.record, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l))
    .filter((r) => r.path && r.path.endsWith('/chat/completions'));
}

function csEnv() {
  return {
    ...process.env,
    XDG_CONFIG_HOME: path.join(ctx.tmp, 'xdg-config'),
    XDG_DATA_HOME: path.join(ctx.tmp, 'xdg-data'),
    XDG_CACHE_HOME: path.join(ctx.tmp, 'xdg-cache'),
    HOME: path.join(ctx.tmp, 'home'),
    NAGENT_VSCODE_TEST_REPORT: ctx.report,
    OPENAI_API_KEY: 'sk-e2e-not-a-real-key',
    NAGENT_MODEL: '',
    OPENAI_BASE_URL: '',
  };
}

function writeUserSettings(ud) {
  const settings = {
    'nagent.server.command': serverArgv(),
    'nagent.baseUrl': ctx.baseUrl,
    'nagent.model': MODEL,
    'nagent.history.summarize': false,
    'nagent.shell': 'deny',
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'security.workspace.trust.enabled': false,
    'extensions.autoUpdate': false,
    'extensions.autoCheckUpdates': false,
    'extensions.ignoreRecommendations': true,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'editor.hover.delay': 200,
    'editor.minimap.enabled': false,
    'git.autofetch': false,
    'git.openRepositoryInParentFolders': 'never',
    'files.autoSave': 'off',
  };
  fs.mkdirSync(path.join(ud, 'User'), { recursive: true });
  fs.writeFileSync(path.join(ud, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
}

function installExtension(ud, ext) {
  const out = cp.execFileSync(CS_BIN, ['--user-data-dir', ud, '--extensions-dir', ext, '--install-extension', VSIX, '--force'], {
    env: csEnv(),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 120000,
  });
  assert(/successfully installed/i.test(out), 'code-server did not install the .vsix', out);
  const list = cp.execFileSync(CS_BIN, ['--user-data-dir', ud, '--extensions-dir', ext, '--list-extensions', '--show-versions'], {
    env: csEnv(),
    encoding: 'utf8',
    timeout: 60000,
  });
  assert(/nagent\.nagent-vscode@/.test(list), 'installed extensions do not list nagent.nagent-vscode', list);
}

async function startCodeServer(ud, ext, port) {
  const log = fs.openSync(path.join(ctx.artifacts, 'code-server.log'), 'w');
  const proc = cp.spawn(
    CS_BIN,
    [
      '--auth', 'none',
      '--bind-addr', `127.0.0.1:${port}`,
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      '--user-data-dir', ud,
      '--extensions-dir', ext,
      ctx.ws,
    ],
    { env: csEnv(), stdio: ['ignore', log, log], detached: true },
  );
  ctx.procs.push(proc);
  const t0 = Date.now();
  while (Date.now() - t0 < 60000) {
    if (proc.exitCode !== null) throw new Error(`code-server exited with ${proc.exitCode}`);
    if (await httpOk(`http://127.0.0.1:${port}/healthz`)) return;
    await sleep(300);
  }
  throw new Error('code-server did not answer /healthz within 60 s');
}

function httpOk(url) {
  return new Promise((resolve) => {
    const req = http.get(url, (res) => {
      res.resume();
      resolve(res.statusCode !== undefined && res.statusCode < 500);
    });
    req.on('error', () => resolve(false));
    req.setTimeout(2000, () => {
      req.destroy();
      resolve(false);
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------------------------------------
// the report the extension writes

function readReport() {
  if (!fs.existsSync(ctx.report)) return [];
  const out = [];
  for (const line of fs.readFileSync(ctx.report, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      /* being written */
    }
  }
  return out;
}

/** Mark the current end of the report: waitFor() only looks at records written after it. */
function mark() {
  ctx.reportIndex = readReport().length;
}

async function waitFor(event, timeoutMs = 30000) {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    const rec = readReport()
      .slice(ctx.reportIndex)
      .find((r) => r.event === event);
    if (rec) return rec;
    await sleep(200);
  }
  throw new Error(`no "${event}" record in the extension's test report after ${timeoutMs} ms`);
}

// ------------------------------------------------------------------------------------------------
// UI gestures

function page() {
  if (!ctx.page) throw new Error('no page');
  return ctx.page;
}

async function shot(name) {
  try {
    if (ctx.page) await ctx.page.screenshot({ path: path.join(ctx.artifacts, `${name}.png`) });
  } catch {
    /* page gone */
  }
}

async function dismissOverlays() {
  try {
    for (let i = 0; i < 3; i++) await page().keyboard.press('Escape');
  } catch {
    /* ignore */
  }
}

/**
 * F1, type the command's title, then pick the row whose label is that title (recently used
 * commands may be listed above it) by clicking it.
 */
async function palette(title) {
  const p = page();
  await p.keyboard.press('F1');
  const input = p.locator('.quick-input-widget input[type="text"], .quick-input-widget .quick-input-box input').first();
  await input.waitFor({ state: 'visible', timeout: 20000 });
  await input.fill('>' + title);
  const handle = await p.waitForFunction(
    (t) => {
      const rows = Array.from(document.querySelectorAll('.quick-input-widget .quick-input-list .monaco-list-row'));
      const label = (r) => ((r.querySelector('.label-name') || r).textContent || '').trim().replace(/…$/, '');
      const row = rows.find((r) => label(r) === t) || rows.find((r) => label(r).startsWith(t));
      return row ? row.getAttribute('data-index') : null;
    },
    title,
    { timeout: 20000 },
  );
  const index = await handle.jsonValue();
  await p.locator(`.quick-input-widget .quick-input-list .monaco-list-row[data-index="${index}"]`).click();
}

/** Answer an input box (showInputBox) whose title contains `title`. */
async function answerInput(title, text) {
  const p = page();
  await p.waitForFunction(
    (t) => {
      const w = document.querySelector('.quick-input-widget');
      if (!w || (w instanceof HTMLElement && w.style.display === 'none')) return false;
      return (w.textContent || '').includes(t);
    },
    title,
    { timeout: 20000 },
  );
  const input = p.locator('.quick-input-widget input').first();
  await input.fill(text);
  await p.keyboard.press('Enter');
}

async function openFile(rel) {
  const p = page();
  await p.keyboard.press('Control+P');
  const input = p.locator('.quick-input-widget input').first();
  await input.waitFor({ state: 'visible', timeout: 20000 });
  await input.fill(rel);
  await p.waitForFunction(
    (name) => {
      const row = document.querySelector('.quick-input-widget .quick-input-list .monaco-list-row.focused');
      return !!row && (row.textContent || '').includes(name);
    },
    path.basename(rel),
    { timeout: 15000 },
  );
  await p.keyboard.press('Enter');
  await p.waitForFunction(
    (name) => {
      const tab = document.querySelector('.tabs-container .tab.active');
      return !!tab && (tab.textContent || '').includes(name);
    },
    path.basename(rel),
    { timeout: 15000 },
  );
  await focusEditor();
}

/** Close every editor group, then open `rel` alone. */
async function freshEditor(rel) {
  await palette('View: Close All Editor Groups');
  await sleep(300);
  await openFile(rel);
}

/** Change a setting through the Settings editor (search its id, edit the control), then return to app.py. */
async function setSettingInUI(key, value) {
  const p = page();
  await palette('Preferences: Open User Settings');
  const search = p.locator('.settings-editor .settings-header textarea').first();
  await search.waitFor({ state: 'attached', timeout: 20000 });
  await p.waitForTimeout(500);
  await p.keyboard.type(key);
  if (typeof value === 'boolean') {
    // the Settings editor titles "nagent.confirmEdits" as "Confirm Edits"
    const last = key.split('.').pop() || key;
    const title = (last[0].toUpperCase() + last.slice(1)).replace(/([a-z])([A-Z])/g, '$1 $2');
    const item = p.locator('.settings-editor .setting-item-bool').filter({ hasText: title }).first();
    await item.waitFor({ state: 'visible', timeout: 20000 });
    const box = item.locator('.setting-value-checkbox').first();
    const checked = (await box.getAttribute('aria-checked')) === 'true';
    if (checked !== value) await box.click();
  } else {
    const field = p.locator(`.settings-editor input[aria-label="${key}"]`).first();
    await field.waitFor({ state: 'visible', timeout: 20000 });
    await field.fill(String(value));
    await p.keyboard.press('Tab');
  }
  await shot(`settings-${key}`);
  await p.waitForTimeout(800);
  // back to the file (click it in the Explorer), so the palette is reachable again
  await p.locator('.explorer-folders-view .monaco-list-row', { hasText: 'app.py' }).first().click();
}

async function focusEditor() {
  const p = page();
  // the active editor group's text area
  const lines = p.locator('.editor-group-container.active .monaco-editor .view-lines').first();
  await lines.waitFor({ state: 'visible', timeout: 20000 });
  await lines.click({ position: { x: 200, y: 5 } });
}

async function statusBarText() {
  return page().evaluate(() =>
    Array.from(document.querySelectorAll('.statusbar-item'))
      .map((e) => (e.textContent || '').trim())
      .filter((t) => t.includes('scripted-e2e-model')),
  );
}

// ------------------------------------------------------------------------------------------------
// the test

async function main() {
  const t0 = Date.now();
  ctx.tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nagent-vscode-e2e-'));
  ctx.artifacts = process.env.NAGENT_E2E_ARTIFACTS ? path.resolve(process.env.NAGENT_E2E_ARTIFACTS) : path.join(ctx.tmp, 'artifacts');
  fs.mkdirSync(ctx.artifacts, { recursive: true });
  ctx.ws = path.join(ctx.tmp, 'ws');
  ctx.report = path.join(ctx.artifacts, 'extension-report.jsonl');
  if (fs.existsSync(ctx.report)) fs.unlinkSync(ctx.report);
  console.log(`e2e: temp ${ctx.tmp}, artifacts ${ctx.artifacts}`);
  console.log(`e2e: server ${JSON.stringify(serverArgv())}; code-server ${CS_BIN}; vsix ${VSIX}`);
  const argv0 = serverArgv()[0];
  if (path.isAbsolute(argv0) && !fs.existsSync(argv0)) throw new Error(`the server executable ${argv0} does not exist (set NAGENT_LSP_COMMAND)`);

  makeRepository();
  ctx.baseUrl = await startFakeModel();
  console.log(`e2e: fake model at ${ctx.baseUrl}`);

  const ud = path.join(ctx.tmp, 'user-data');
  const ext = path.join(ctx.tmp, 'extensions');
  for (const d of ['xdg-config', 'xdg-data', 'xdg-cache', 'home']) fs.mkdirSync(path.join(ctx.tmp, d), { recursive: true });
  writeUserSettings(ud);
  installExtension(ud, ext);
  const port = await freePort();
  await startCodeServer(ud, ext, port);
  console.log(`e2e: code-server on 127.0.0.1:${port} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);

  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage'],
  });
  try {
    const pg = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    ctx.page = pg;
    const consoleLog = fs.createWriteStream(path.join(ctx.artifacts, 'browser-console.log'));
    pg.on('console', (m) => consoleLog.write(`[${m.type()}] ${m.text()}\n`));
    await pg.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ctx.ws)}`, { waitUntil: 'domcontentloaded' });
    await pg.waitForSelector('.monaco-workbench', { timeout: 90000 });
    console.log(`e2e: workbench up (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    await runSteps();
  } finally {
    await shot('final');
    await browser.close().catch(() => undefined);
  }
}

async function runSteps() {
  await step('extension activates and starts nagent-lsp', async () => {
    const rec = await waitFor('activated', 90000);
    assert(rec.ok, 'the extension could not start the server', rec);
    const r = rec.result || {};
    ctx.serverCommands = r.serverCommands || [];
    ctx.hoverProvider = !!r.hoverProvider;
    assert(ctx.serverCommands.includes('nagent.status'), 'server does not advertise nagent.status', r.serverCommands);
    assert(r.launch && r.launch.source === 'nagent.server.command', 'server not started from nagent.server.command', r.launch);
    console.log(`     server commands: ${ctx.serverCommands.join(', ')}; hover: ${ctx.hoverProvider}`);
  });
  if (!results[0] || results[0].status !== 'pass') return;

  await step('Show Status (palette) reports the model from the VS Code settings', async () => {
    mark();
    await palette('nagent: Show Status');
    const rec = await waitFor('nagent.vscode.showStatus');
    assert(rec.ok, 'Show Status failed', rec.error);
    const s = rec.result.status;
    assert(s.model === MODEL, `model is ${s.model}, expected ${MODEL} (settings did not reach the server)`, s);
    assert(s.baseUrl === ctx.baseUrl, `baseUrl is ${s.baseUrl}, expected ${ctx.baseUrl}`, s);
    assert(s.modelConfigured === true, 'modelConfigured is not true', s);
    assert(
      s.configSources.includes('initializationOptions') || s.configSources.includes('workspace/configuration'),
      'settings came neither from initializationOptions nor workspace/configuration',
      s.configSources,
    );
    assert((s.workspaceFolders || []).some((f) => path.resolve(f) === ctx.ws), 'workspace folder missing', s.workspaceFolders);
    const bar = await statusBarText();
    assert(bar.length > 0, 'status bar item with the model name not found');
  });

  await step('open app.py from Quick Open', async () => {
    await openFile('app.py');
  });

  await step('Edit Selection… changes the document as the scripted model wrote it', async () => {
    const p = page();
    await focusEditor();
    await p.keyboard.press('Control+Home');
    for (let i = 0; i < 5; i++) await p.keyboard.press('Shift+ArrowDown');
    mark();
    await palette('nagent: Edit Selection');
    await answerInput('Edit Selection', REQUEST);
    const rec = await waitFor('nagent.vscode.editSelection', 90000);
    assert(rec.ok, 'Edit Selection failed', rec.error);
    assert(rec.result.applied === true, 'edit not applied', rec.result);
    assert(rec.result.edits >= 1, 'no TextEdits reported', rec.result);
    assert(rec.activeDocument && rec.activeDocument.fsPath === path.join(ctx.ws, 'app.py'), 'active document is not app.py', rec.activeDocument);
    assert(rec.activeDocument.text === APP_NEW, 'document text differs from what the model wrote', {
      expected: APP_NEW,
      actual: rec.activeDocument.text,
    });
    assert(rec.activeDocument.isDirty === true, 'the edit should be an unsaved buffer change, not a disk write');
    assert(fs.readFileSync(path.join(ctx.ws, 'app.py'), 'utf8') === APP_V3, 'the file on disk changed behind the editor');
    const reqs = modelRequests();
    assert(reqs.length === 2, `expected 2 model calls, got ${reqs.length}`);
    const sent = JSON.stringify(reqs[0].messages || []);
    assert(sent.includes(REQUEST), 'the request text was not sent to the model');
    assert(reqs[0].body && reqs[0].body.model === MODEL, 'model name not sent', reqs[0].body && reqs[0].body.model);
    let bar = '';
    for (let i = 0; i < 50 && !(/↑/.test(bar) && /↓/.test(bar)); i++) {
      bar = (await statusBarText()).join(' ');
      await sleep(100);
    }
    assert(/2\.7k↑/.test(bar) && /360↓/.test(bar), `status bar does not show the last run's tokens (2.7k↑ 360↓): ${bar}`);
  }, { needs: ['nagent.edit'] });

  await step('the edit is one undo step (Ctrl+Z restores, Ctrl+Shift+Z re-applies)', async () => {
    const p = page();
    /** Show Status records the active document without moving the focus. */
    const activeText = async () => {
      mark();
      await palette('nagent: Show Status');
      const rec = await waitFor('nagent.vscode.showStatus');
      assert(rec.activeDocument && rec.activeDocument.fsPath === path.join(ctx.ws, 'app.py'), 'app.py is not active', rec.activeDocument);
      return rec.activeDocument.text;
    };
    await focusEditor();
    await p.keyboard.press('Control+Z');
    const undone = await activeText();
    assert(undone === APP_V3, 'one Ctrl+Z did not restore the text before the edit', { expected: APP_V3, actual: undone });
    await focusEditor();
    await p.keyboard.press('Control+Shift+Z');
    const redone = await activeText();
    assert(redone === APP_NEW, 'Ctrl+Shift+Z did not re-apply the edit', { expected: APP_NEW, actual: redone });
    // Ctrl+S writes what the model produced (and leaves no dirty buffer behind for later steps)
    await focusEditor();
    await p.keyboard.press('Control+S');
    const file = path.join(ctx.ws, 'app.py');
    const t0 = Date.now();
    while (fs.readFileSync(file, 'utf8') !== APP_NEW && Date.now() - t0 < 10000) await sleep(200);
    assert(fs.readFileSync(file, 'utf8') === APP_NEW, 'Ctrl+S did not save the edited text');
  }, { needs: ['nagent.edit'] });

  await step('hover shows the history card', async () => {
    const p = page();
    await focusEditor();
    await p.keyboard.press('Control+Home');
    mark();
    await palette('Show or Focus Hover');
    const rec = await waitFor('hover', 30000);
    const md = (rec.result.markdown || []).join('\n');
    for (const s of ['Handle empty names', 'Alice Example', 'Bob Example']) assert(md.includes(s), `hover Markdown lacks "${s}"`, md);
    assert(/util\.py/.test(md), 'hover lacks the co-edited util.py', md);
    await p.waitForFunction(
      () => Array.from(document.querySelectorAll('.monaco-hover')).some((h) => (h.textContent || '').includes('Handle empty names')),
      undefined,
      { timeout: 20000 },
    );
    await shot('hover');
    await p.keyboard.press('Escape');
  }, { needs: ['hover'] });

  await step('Open File Conversation opens the conversation beside the file', async () => {
    await focusEditor();
    mark();
    await palette('nagent: Open File Conversation');
    const rec = await waitFor('nagent.vscode.openConversation');
    assert(rec.ok, 'Open File Conversation failed', rec.error);
    const conv = rec.result.path;
    assert(typeof conv === 'string' && fs.existsSync(conv), 'conversation file does not exist', rec.result);
    assert(rec.visibleDocuments.includes(conv), 'conversation is not visible', rec.visibleDocuments);
    assert(rec.visibleDocuments.includes(path.join(ctx.ws, 'app.py')), 'app.py is no longer visible beside it', rec.visibleDocuments);
    assert(rec.activeDocument && rec.activeDocument.fsPath === conv, 'conversation is not the active editor', rec.activeDocument);
    if (ctx.serverCommands.includes('nagent.edit')) {
      assert(rec.activeDocument.text.includes(REQUEST), 'conversation does not hold the edit request', rec.activeDocument.text.slice(0, 2000));
    }
    const groups = await page().evaluate(() => document.querySelectorAll('.editor-group-container').length);
    assert(groups >= 2, `expected the conversation in a second editor group, found ${groups} group(s)`);
  }, { needs: ['nagent.conversation.open'] });

  await step('Show File History opens the history beside', async () => {
    await freshEditor('app.py');
    mark();
    await palette('nagent: Show File History');
    const rec = await waitFor('nagent.vscode.showHistory');
    assert(rec.ok, 'Show File History failed', rec.error);
    assert(rec.result.commits.length === 3, `expected 3 commits, got ${rec.result.commits.length}`, rec.result.commits);
    assert(rec.activeDocument && rec.activeDocument.uri.startsWith('nagent-view:'), 'history view not active', rec.activeDocument);
    assert(rec.activeDocument.text.includes('Handle empty names'), 'history view lacks a commit subject', rec.activeDocument.text);
  }, { needs: ['nagent.history'] });

  await step('Show Co-edited Files lists util.py and opens it', async () => {
    await freshEditor('app.py');
    mark();
    await palette('nagent: Show Co-edited Files');
    const p = page();
    await p.waitForFunction(
      () => Array.from(document.querySelectorAll('.quick-input-widget .monaco-list-row')).some((r) => (r.textContent || '').includes('util.py')),
      undefined,
      { timeout: 15000 },
    );
    await p.keyboard.press('Enter');
    const rec = await waitFor('nagent.vscode.showCoedits');
    assert(rec.ok, 'Show Co-edited Files failed', rec.error);
    assert(rec.result.picked === path.join(ctx.ws, 'util.py'), 'util.py was not opened', rec.result);
    assert(rec.activeDocument && rec.activeDocument.fsPath === path.join(ctx.ws, 'util.py'), 'util.py not active', rec.activeDocument);
  }, { needs: ['nagent.coedits'] });

  await step('Split File then Apply Patch (no change) round-trips', async () => {
    await freshEditor('app.py');
    mark();
    await palette('nagent: Split File');
    const rec = await waitFor('nagent.vscode.split');
    assert(rec.ok, 'Split File failed', rec.error);
    assert(fs.existsSync(rec.result.indexPath), 'index.json missing', rec.result);
    assert(rec.result.segments.length >= 1, 'no segments', rec.result);
    mark();
    await palette('nagent: Apply Patch');
    const p = page();
    await p.waitForFunction(
      () => Array.from(document.querySelectorAll('.quick-input-widget .monaco-list-row')).some((r) => (r.textContent || '').includes('app.py')),
      undefined,
      { timeout: 15000 },
    );
    await p.keyboard.press('Enter');
    const pr = await waitFor('nagent.vscode.patch');
    assert(pr.ok, 'Apply Patch failed', pr.error);
    assert(pr.result.applied === false || pr.result.changed === false || pr.result.edits === 0, 'unchanged segments should not edit', pr.result);
  }, { needs: ['nagent.split', 'nagent.patch'] });

  await step('Clear File Conversation (modal confirm) archives the conversation', async () => {
    await freshEditor('app.py');
    mark();
    await palette('nagent: Clear File Conversation');
    const p = page();
    const btn = p.locator('.monaco-dialog-box .monaco-button', { hasText: 'Clear' }).first();
    await btn.waitFor({ state: 'visible', timeout: 20000 });
    await btn.click();
    const rec = await waitFor('nagent.vscode.clearConversation');
    assert(rec.ok, 'Clear File Conversation failed', rec.error);
    if (rec.result.archivedPath) assert(fs.existsSync(rec.result.archivedPath), 'archived conversation missing', rec.result);
  }, { needs: ['nagent.conversation.clear'] });

  await step('Summarize File shows the model summary beside the file', async () => {
    await freshEditor('app.py');
    mark();
    await palette('nagent: Summarize File');
    const rec = await waitFor('nagent.vscode.summarize', 60000);
    assert(rec.ok, 'Summarize File failed', rec.error);
    assert(rec.result.summary.includes('tiny greeting module'), 'summary is not the scripted one', rec.result);
    assert(rec.activeDocument && rec.activeDocument.uri.startsWith('nagent-view:'), 'summary view not active', rec.activeDocument);
    assert(rec.activeDocument.text.includes('tiny greeting module'), 'summary view lacks the summary', rec.activeDocument.text);
  }, { needs: ['nagent.summarize'] });

  await step('the progress notification cancels a running edit', async () => {
    const p = page();
    await freshEditor('app.py');
    mark();
    await palette('nagent: Edit File');
    await answerInput('Edit File', 'a slow request that will be cancelled');
    const cancel = p.locator('.notifications-toasts .notification-toast', { hasText: 'nagent' }).locator('.monaco-button', { hasText: 'Cancel' }).first();
    await cancel.waitFor({ state: 'visible', timeout: 30000 });
    await shot('progress');
    const t0 = Date.now();
    await cancel.click();
    const rec = await waitFor('nagent.vscode.editFile', 20000);
    const took = Date.now() - t0;
    assert(took < 10000, `the run ended ${took} ms after Cancel (the model reply was due in 30 s)`);
    if (rec.ok) assert(rec.result.applied === false && /cancel/i.test(rec.result.reason || ''), 'cancelled run reported as applied', rec.result);
    assert(rec.activeDocument.text === APP_NEW, 'a cancelled run changed the document', rec.activeDocument.text);
  }, { needs: ['nagent.edit'] });

  await step('with nagent.confirmEdits the edit waits in the refactor preview until Apply', async () => {
    const p = page();
    await setSettingInUI('nagent.confirmEdits', true);
    await freshEditor('app.py');
    mark();
    await palette('nagent: Edit File');
    await answerInput('Edit File', 'change the demo call');
    const apply = p.locator('.monaco-button', { hasText: /^Apply$/ }).first();
    await apply.waitFor({ state: 'visible', timeout: 30000 });
    await shot('refactor-preview');
    // edits that need confirmation arrive unchecked: tick the file, as a user would, then Apply
    const row = p.locator('.monaco-list-row', { hasText: 'app.py' }).filter({ has: p.locator('input[type="checkbox"]') }).first();
    fs.writeFileSync(path.join(ctx.artifacts, 'refactor-preview.html'), await p.locator('.monaco-workbench').evaluate((e) => {
      const panel = Array.from(e.querySelectorAll('.pane-body, .panel')).find((x) => (x.textContent || '').includes('Discard'));
      return panel ? panel.outerHTML : '';
    }));
    await row.locator('input[type="checkbox"]').first().check();
    const before = readReport().slice(ctx.reportIndex).find((r) => r.event === 'nagent.vscode.editFile');
    assert(!before, 'the edit finished before it was confirmed', before);
    await apply.click();
    const rec = await waitFor('nagent.vscode.editFile', 30000);
    assert(rec.ok && rec.result.applied === true, 'confirmed edit not applied', rec.result || rec.error);
    const text = fs.readFileSync(path.join(ctx.ws, 'app.py'), 'utf8');
    const doc = rec.activeDocument && rec.activeDocument.fsPath === path.join(ctx.ws, 'app.py') ? rec.activeDocument.text : text;
    assert(doc === APP_CONFIRMED, 'the confirmed text is not in app.py', { doc, disk: text });
    await focusEditor();
    await p.keyboard.press('Control+S');
    const t1 = Date.now();
    while (fs.readFileSync(path.join(ctx.ws, 'app.py'), 'utf8') !== APP_CONFIRMED && Date.now() - t1 < 10000) await sleep(200);
    await setSettingInUI('nagent.confirmEdits', false);
  }, { needs: ['nagent.edit'] });

  await step('a changed setting reaches the running server (didChangeConfiguration → workspace/configuration)', async () => {
    // through the Settings editor, as a user would: search "nagent.model", type the new value
    await setSettingInUI('nagent.model', MODEL_2);
    let model = '';
    const t0 = Date.now();
    while (Date.now() - t0 < 20000) {
      mark();
      await palette('nagent: Show Status');
      const rec = await waitFor('nagent.vscode.showStatus');
      assert(rec.ok, 'Show Status failed', rec.error);
      model = rec.result.status.model;
      if (model === MODEL_2) break;
      await sleep(1000);
    }
    assert(model === MODEL_2, `the server still reports model ${model} after the setting changed to ${MODEL_2}`);
  });

  await step('Restart Server starts a new server that still has the settings', async () => {
    mark();
    await palette('nagent: Restart Server');
    const rec = await waitFor('nagent.vscode.restart', 60000);
    assert(rec.ok, 'Restart Server failed', rec.error);
    assert(rec.result.serverCommands.includes('nagent.status'), 'restarted server has no commands', rec.result);
    mark();
    await palette('nagent: Show Status');
    const st = await waitFor('nagent.vscode.showStatus');
    assert(st.ok && st.result.status.model === MODEL_2, 'after restart the model setting was lost', st.result);
  });

  await step('a server error becomes a notification with the server message', async () => {
    // The scripted replies are used up: the fake model answers 400 "no scripted reply left", the
    // server turns that into an error response, and the extension must show its message.
    await freshEditor('app.py');
    const before = fs.readFileSync(path.join(ctx.ws, 'app.py'), 'utf8');
    mark();
    await palette('nagent: Edit File');
    await answerInput('Edit File', 'this request has no scripted reply');
    const rec = await waitFor('nagent.vscode.editFile', 90000);
    assert(!rec.ok, 'Edit File should have failed', rec.result);
    assert(typeof rec.error === 'string' && rec.error.length > 0, 'no error message recorded', rec);
    const probe = rec.error.slice(0, 40);
    await page().waitForFunction(
      (t) => Array.from(document.querySelectorAll('.notification-list-item-message')).some((n) => (n.textContent || '').includes(t)),
      probe,
      { timeout: 20000 },
    );
    assert(rec.activeDocument.text === before, 'a failed edit must not change the document', { before, after: rec.activeDocument.text });
  }, { needs: ['nagent.edit'] });
}

// ------------------------------------------------------------------------------------------------

function printDiagnostics() {
  const tail = (file, n = 60) => {
    try {
      const lines = fs.readFileSync(file, 'utf8').split('\n');
      return lines.slice(-n).join('\n');
    } catch {
      return '(missing)';
    }
  };
  console.log(`--- extension report (${ctx.report}) ---\n${tail(ctx.report, 30)}`);
  for (const f of findFiles(path.join(ctx.tmp, 'user-data', 'logs'), (n) => /nagent/i.test(n) || n === 'exthost.log')) {
    console.log(`--- ${f} ---\n${tail(f, 80)}`);
  }
  console.log(`--- code-server.log ---\n${tail(path.join(ctx.artifacts, 'code-server.log'), 30)}`);
  console.log(`--- fake-openai.log ---\n${tail(path.join(ctx.artifacts, 'fake-openai.log'), 20)}`);
}

function findFiles(dir, pred, out = []) {
  let entries = [];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) findFiles(p, pred, out);
    else if (pred(e.name)) out.push(p);
  }
  return out;
}

function cleanup() {
  for (const p of ctx.procs) {
    if (p.pid && p.exitCode === null) {
      try {
        process.kill(-p.pid, 'SIGTERM');
      } catch {
        /* gone */
      }
    }
  }
}

process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});
process.on('SIGTERM', () => {
  cleanup();
  process.exit(143);
});

main()
  .catch((e) => {
    results.push({ name: 'setup', status: 'fail', detail: e && e.stack ? e.stack : String(e), ms: 0 });
    console.log(`FAIL setup\n${indent(e && e.stack ? e.stack : String(e))}`);
  })
  .finally(async () => {
    cleanup();
    await sleep(500);
    const passed = results.filter((r) => r.status === 'pass').length;
    const failed = results.filter((r) => r.status === 'fail').length;
    const skipped = results.filter((r) => r.status === 'skip').length;
    if (failed > 0) printDiagnostics();
    console.log('');
    console.log('VS Code e2e summary:');
    for (const r of results) console.log(`  ${r.status.toUpperCase().padEnd(4)} ${r.name}${r.detail && r.status === 'skip' ? ` (${r.detail})` : ''}`);
    console.log(`e2e: ${passed} passed, ${failed} failed, ${skipped} skipped`);
    if (failed === 0 && !process.env.NAGENT_E2E_ARTIFACTS) fs.rmSync(ctx.tmp, { recursive: true, force: true });
    else console.log(`e2e: artifacts kept in ${ctx.artifacts}`);
    process.exit(failed > 0 || passed === 0 ? 1 : 0);
  });
