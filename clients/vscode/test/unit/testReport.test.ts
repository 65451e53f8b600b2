import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { test } from 'node:test';
import { readReport, REPORT_ENV, TestReporter } from '../../src/pure/testReport';

test('the test hook is off without the environment variable', () => {
  const r = TestReporter.fromEnv({});
  assert.equal(r.enabled, false);
  assert.equal(r.write({ event: 'x', ok: true }), undefined);
});

test('the test hook appends numbered JSON lines that readReport parses', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nagent-report-'));
  try {
    const file = path.join(dir, 'r.jsonl');
    const r = TestReporter.fromEnv({ [REPORT_ENV]: file });
    assert.ok(r.enabled);
    r.write({ event: 'nagent.vscode.editSelection', ok: true, result: { applied: true }, activeDocument: { uri: 'file:///a', text: 'x\n' } });
    r.write({ event: 'nagent.vscode.showStatus', ok: false, error: 'boom' });
    fs.appendFileSync(file, '{"torn": ');
    const records = readReport(fs.readFileSync(file, 'utf8'));
    assert.equal(records.length, 2);
    assert.deepEqual(records.map((x) => x.seq), [1, 2]);
    assert.equal(records[0].activeDocument?.text, 'x\n');
    assert.equal(records[1].error, 'boom');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
