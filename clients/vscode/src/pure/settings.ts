/**
 * Server settings as the extension hands them to nagent-lsp (DESIGN §4).
 *
 * package.json `contributes.configuration` is the single source of truth: every `nagent.*` property
 * except the client-only `nagent.server.*` ones is a server setting. Only values the user set
 * explicitly (user, workspace or folder settings) are sent, nested as the server expects
 * (`{"model": "...", "history": {"maxCommits": 5}}`), so the server's own layering
 * (defaults < ~/.nagent/config.json < <repo>/.nagent/config.json < environment) is not overridden
 * by VS Code's defaults. No `vscode` import here: pure and unit-tested.
 */
import * as manifest from '../../package.json';

export const SECTION = 'nagent';
/** Settings that configure the client (how to start the server); never sent to the server. */
export const CLIENT_ONLY_PREFIX = 'server.';

export interface PropertySchema {
  type?: string | string[];
  default?: unknown;
  description?: string;
  markdownDescription?: string;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  items?: { type?: string };
}

export function contributedProperties(): Record<string, PropertySchema> {
  return (manifest.contributes.configuration.properties as unknown) as Record<string, PropertySchema>;
}

/** Server setting keys relative to the `nagent` section, dotted: `model`, `history.maxCommits`, ... */
export function serverSettingKeys(props: Record<string, PropertySchema> = contributedProperties()): string[] {
  return Object.keys(props)
    .filter((k) => k.startsWith(SECTION + '.'))
    .map((k) => k.slice(SECTION.length + 1))
    .filter((k) => !k.startsWith(CLIENT_ONLY_PREFIX));
}

/** What VS Code's `WorkspaceConfiguration.inspect` tells about one key (the parts we use). */
export interface Inspection {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
  globalLanguageValue?: unknown;
  workspaceLanguageValue?: unknown;
  workspaceFolderLanguageValue?: unknown;
}

/** The subset of `vscode.WorkspaceConfiguration` (for section `nagent`) this module needs. */
export interface ConfigReader {
  get(key: string): unknown;
  inspect(key: string): Inspection | undefined;
}

export function isExplicit(i: Inspection | undefined): boolean {
  if (!i) return false;
  return (
    i.globalValue !== undefined ||
    i.workspaceValue !== undefined ||
    i.workspaceFolderValue !== undefined ||
    i.globalLanguageValue !== undefined ||
    i.workspaceLanguageValue !== undefined ||
    i.workspaceFolderLanguageValue !== undefined
  );
}

/** `{"history.maxCommits": 5, "model": "m"}` → `{"history": {"maxCommits": 5}, "model": "m"}`. */
export function nest(flat: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(flat)) {
    const parts = key.split('.');
    let node = out;
    for (const part of parts.slice(0, -1)) {
      const next = node[part];
      if (typeof next !== 'object' || next === null || Array.isArray(next)) node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = value;
  }
  return out;
}

/**
 * The nested object of explicitly set server settings. Values that mean "not set" for the server
 * (null, empty string) are left out too.
 */
export function explicitServerSettings(config: ConfigReader, keys: string[] = serverSettingKeys()): Record<string, unknown> {
  const flat: Record<string, unknown> = {};
  for (const key of keys) {
    if (!isExplicit(config.inspect(key))) continue;
    const value = config.get(key);
    if (value === undefined || value === null || value === '') continue;
    flat[key] = value;
  }
  return nest(flat);
}

/**
 * Answer for one `workspace/configuration` item: section `nagent` → the whole nested object,
 * `nagent.history` → its sub-object, `nagent.model` → the value (or null when not set).
 */
export function sectionValue(settings: Record<string, unknown>, section: string): unknown {
  if (section === SECTION) return settings;
  if (!section.startsWith(SECTION + '.')) return undefined;
  let node: unknown = settings;
  for (const part of section.slice(SECTION.length + 1).split('.')) {
    if (typeof node !== 'object' || node === null) return null;
    node = (node as Record<string, unknown>)[part];
  }
  return node === undefined ? null : node;
}

/** True when a configuration change touches how the server is started (needs a restart). */
export const SERVER_LAUNCH_SECTION = `${SECTION}.server`;

/** Dotted keys of a nested settings object (`{"history": {"maxCommits": 5}}` → `["history.maxCommits"]`). */
export function flatKeys(settings: Record<string, unknown>, prefix = ''): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(settings)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v) && k !== 'models') out.push(...flatKeys(v as Record<string, unknown>, key));
    else out.push(key);
  }
  return out;
}

/**
 * Keys sent in `initializationOptions` that are no longer set. The server keeps that layer until it
 * restarts, so clearing such a setting (e.g. `nagent.baseUrl` emptied in the Settings UI) needs a restart.
 */
export function clearedKeys(sentAtStart: Record<string, unknown>, now: Record<string, unknown>): string[] {
  const current = new Set(flatKeys(now));
  return flatKeys(sentAtStart).filter((k) => !current.has(k));
}

/** The value at a dotted key of a nested settings object (undefined when absent). */
export function valueAt(settings: Record<string, unknown> | undefined, key: string): unknown {
  let node: unknown = settings;
  for (const part of key.split('.')) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** The scalar settings (dotted keys) whose value differs between two sent settings objects. */
export function changedScalars(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of flatKeys(after)) {
    const v = valueAt(after, key);
    if ((typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') && v !== valueAt(before, key)) out[key] = v;
  }
  return out;
}

/**
 * True when the server's effective settings (`nagent.status` `settings`) hold every expected value: the
 * server applied a didChangeConfiguration (it pulls workspace/configuration first, so a status asked
 * right after the notification still shows the previous model — issue 25 #8).
 */
export function settingsApplied(expected: Record<string, unknown>, effective: Record<string, unknown> | undefined): boolean {
  if (!effective) return false;
  return Object.entries(expected).every(([k, v]) => valueAt(effective, k) === v);
}
