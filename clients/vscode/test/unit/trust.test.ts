import { strict as assert } from 'assert';
import { test } from 'node:test';
import * as manifest from '../../package.json';
import { Commands } from '../../src/pure/ids';
import { TrustResult } from '../../src/pure/protocol';
import { alreadyTrusted, MAX_LISTED_FILES, nothingToTrust, shortHash, trustArgs, trustOutcome, trustPrompt } from '../../src/pure/trust';

function status(over: Partial<TrustResult> = {}): TrustResult {
  return {
    stateRoot: '/w/repo/.nagent',
    trusted: false,
    hash: '0123456789abcdef0123456789abcdef',
    files: ['config.json', 'recipes/x.yaml'],
    changedSinceTrusted: false,
    message: '',
    ...over,
  };
}

test('the prompt lists the files and the short hash, and says what trusting allows', () => {
  const { message, detail } = trustPrompt(status());
  assert.equal(message, 'nagent: trust the definitions in /w/repo/.nagent?');
  assert.match(detail, /^2 files \(hash 0123456789ab\):\n• config\.json\n• recipes\/x\.yaml\n\n/);
  assert.match(detail, /command steps/);
  assert.match(detail, /code actions/);
  assert.match(detail, /Any change to these files revokes the trust/);
});

test('a repository that changed since it was trusted is asked about again, and says so', () => {
  const s = status({ trusted: false, changedSinceTrusted: true });
  assert.match(trustPrompt(s).message, /changed since you trusted them/);
  assert.equal(alreadyTrusted(s), false);
  assert.equal(alreadyTrusted(status({ trusted: true })), true);
});

test('a long list is cut with a count of the rest (a modal cannot scroll)', () => {
  const files = Array.from({ length: MAX_LISTED_FILES + 5 }, (_, i) => `recipes/r${i}.yaml`);
  const { detail } = trustPrompt(status({ files }));
  assert.match(detail, /^25 files/);
  assert.ok(detail.includes(`recipes/r${MAX_LISTED_FILES - 1}.yaml`));
  assert.ok(!detail.includes(`recipes/r${MAX_LISTED_FILES}.yaml`));
  assert.match(detail, /… and 5 more/);
});

test('nothing to trust when the repository defines nothing (no hash, no files)', () => {
  assert.equal(nothingToTrust(status({ hash: null, files: [] })), true);
  assert.equal(nothingToTrust(status()), false);
  assert.equal(shortHash(null), '');
});

test("the outcome is the server's message, prefixed once", () => {
  assert.equal(trustOutcome(status({ message: 'trusted 2 files' })), 'nagent: trusted 2 files');
  assert.equal(trustOutcome(status({ message: 'nagent: revoked' })), 'nagent: revoked');
  assert.equal(trustOutcome(status({ trusted: true })), 'nagent: the definitions in /w/repo/.nagent are trusted (hash 0123456789ab).');
  assert.equal(trustOutcome(status()), 'nagent: the definitions in /w/repo/.nagent are not trusted.');
});

test('the argument names the active file, or nothing (the first workspace folder)', () => {
  assert.deepEqual(trustArgs('file:///w/repo/a.py'), { uri: 'file:///w/repo/a.py' });
  assert.deepEqual(trustArgs(undefined), {});
});

test('the trust commands are in the palette with their titles', () => {
  const titles = Object.fromEntries(manifest.contributes.commands.map((c) => [c.command, c.title]));
  assert.equal(titles[Commands.trustRepository], "Trust This Repository's Definitions…");
  assert.equal(titles[Commands.revokeRepositoryTrust], "Revoke Trust in This Repository's Definitions");
  const palette = manifest.contributes.menus.commandPalette.map((e) => e.command);
  assert.ok(palette.includes(Commands.trustRepository) && palette.includes(Commands.revokeRepositoryTrust));
});
