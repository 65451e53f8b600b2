/**
 * What "nagent: Trust This Repository's Definitions…" shows (DESIGN §12, "Trust the user, not the
 * repository"): the files a repository's `.nagent/` defines, the hash the trust is recorded under,
 * and what trusting allows. Pure, so the wording is unit-tested without an editor.
 */
import type { TrustResult } from './protocol';

/** The hash as the prompt and the messages show it (the first 12 hex digits, as git does). */
export function shortHash(hash: string | null | undefined): string {
  return hash ? hash.slice(0, 12) : '';
}

/** Nothing to trust: the repository defines no config, agents or recipes. */
export function nothingToTrust(status: TrustResult): boolean {
  return !status.hash || status.files.length === 0;
}

/** Trusted, and the files are the ones the user trusted: asking again would change nothing. */
export function alreadyTrusted(status: TrustResult): boolean {
  return status.trusted && !status.changedSinceTrusted;
}

/** The most files the modal lists; the rest are counted (a dialog cannot scroll). */
export const MAX_LISTED_FILES = 20;

export const TRUST_ALLOWS =
  "Trusting lets this repository's recipes run their command steps (under your shell setting) and offers its " +
  'recipes as code actions. Any change to these files revokes the trust; "nagent: Revoke Trust in This ' +
  'Repository\'s Definitions" revokes it now.';

/** The modal's one-line question and its detail (the files, the hash, what trusting allows). */
export function trustPrompt(status: TrustResult): { message: string; detail: string } {
  const n = status.files.length;
  const message = status.changedSinceTrusted
    ? `nagent: the definitions in ${status.stateRoot} changed since you trusted them. Trust them again?`
    : `nagent: trust the definitions in ${status.stateRoot}?`;
  // bullets: the dialog drops leading blanks
  const listed = status.files.slice(0, MAX_LISTED_FILES).map((f) => `• ${f}`);
  if (n > MAX_LISTED_FILES) listed.push(`… and ${n - MAX_LISTED_FILES} more`);
  const detail = [
    `${n} file${n === 1 ? '' : 's'} (hash ${shortHash(status.hash)}):`,
    ...listed,
    '',
    TRUST_ALLOWS,
  ].join('\n');
  return { message, detail };
}

/** The notification after a trust command: the server's message, or one built from the result. */
export function trustOutcome(result: TrustResult): string {
  const text = result.message?.trim();
  if (text) return /^nagent\b/i.test(text) ? text : `nagent: ${text}`;
  if (result.trusted) return `nagent: the definitions in ${result.stateRoot} are trusted (hash ${shortHash(result.hash)}).`;
  return `nagent: the definitions in ${result.stateRoot} are not trusted.`;
}

/** The command argument: the active file's repository, else (no file) the first workspace folder's. */
export function trustArgs(fileUri: string | undefined): Record<string, unknown> {
  return fileUri ? { uri: fileUri } : {};
}
