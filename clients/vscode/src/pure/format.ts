/** Text the extension shows: status bar, notifications, quick picks. Pure and unit-tested. */
import * as path from 'path';
import type { CoeditRow, EditResult, PatchResult, StatusResult, Tokens } from './protocol';

export function formatCount(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return '?';
  const v = Math.max(0, Math.round(n));
  if (v < 1000) return String(v);
  if (v < 10_000) return `${(v / 1000).toFixed(1).replace(/\.0$/, '')}k`;
  if (v < 1_000_000) return `${Math.round(v / 1000)}k`;
  return `${(v / 1_000_000).toFixed(1).replace(/\.0$/, '')}M`;
}

export function formatTokens(t: Tokens | undefined | null): string {
  if (!t) return '';
  const turns = typeof t.turns === 'number' ? `${t.turns} turn${t.turns === 1 ? '' : 's'}, ` : '';
  return `${turns}${formatCount(t.input)} in / ${formatCount(t.output)} out`;
}

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';

export interface StatusBarView {
  text: string;
  tooltip: string;
}

/** Status bar: `$(hubot) nagent: <model> · 1.2k in / 300 out` (the tokens of the last run). */
export function statusBarView(state: ServerState, model: string | null | undefined, last?: Tokens | null, configured = true): StatusBarView {
  if (state === 'starting') return { text: '$(sync~spin) nagent', tooltip: 'nagent: starting the server…' };
  if (state === 'failed') return { text: '$(error) nagent', tooltip: 'nagent: the server is not running. Click for status.' };
  if (state === 'stopped') return { text: '$(circle-slash) nagent', tooltip: 'nagent: the server is stopped. Click for status.' };
  const name = model || 'no model';
  let text = `$(hubot) ${name}${configured ? '' : ' (not configured)'}`;
  let tooltip = `nagent model: ${name}${configured ? '' : ' — no API key or base URL configured'}`;
  if (last) {
    text += ` · ${formatCount(last.input)}↑ ${formatCount(last.output)}↓`;
    tooltip += `\nLast run: ${formatTokens(last)} tokens`;
  }
  return { text, tooltip: tooltip + '\nClick for nagent status.' };
}

/** The message of a JSON-RPC error (ResponseError), an Error, or anything thrown. */
export function errorMessage(e: unknown): string {
  if (e && typeof e === 'object') {
    const m = (e as { message?: unknown }).message;
    if (typeof m === 'string' && m) return m;
  }
  if (typeof e === 'string') return e;
  try {
    return JSON.stringify(e);
  } catch {
    return String(e);
  }
}

/** JSON-RPC RequestCancelled (-32800) or our own cancellation. */
export function isCancellation(e: unknown): boolean {
  if (!e || typeof e !== 'object') return false;
  const code = (e as { code?: unknown }).code;
  return code === -32800 || (e as { name?: unknown }).name === 'Canceled';
}

/** Message about a missing model: offer to open the settings. */
export function mentionsModelSetup(message: string): boolean {
  return /model|api[_ ]?key|baseUrl|OPENAI_/i.test(message) && /(not configured|no model|set |missing|environment)/i.test(message);
}

export function firstLine(text: string | undefined | null, max = 200): string {
  const line = (text ?? '').trim().split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  return line.length > max ? line.slice(0, max - 1) + '…' : line;
}

export interface Notice {
  level: 'info' | 'warning';
  message: string;
}

export function editNotice(r: EditResult): Notice {
  const tokens = r.tokens ? ` (${formatTokens(r.tokens)} tokens)` : '';
  const response = firstLine(r.response);
  if (r.applied) {
    const n = r.edits ?? 0;
    return {
      level: 'info',
      message: `nagent applied ${n} edit${n === 1 ? '' : 's'}${response ? `: ${response}` : '.'}${tokens}`,
    };
  }
  const reason = r.reason ? `: ${r.reason}` : '';
  return {
    level: r.reason && /no change|cancel/i.test(r.reason) ? 'info' : 'warning',
    message: `nagent did not change the file${reason}${response ? ` — ${response}` : ''}${tokens}`,
  };
}

export function patchNotice(r: PatchResult): Notice {
  if (!r.changed) return { level: 'info', message: 'nagent patch: the segments match the file; nothing to apply.' };
  if (r.applied) return { level: 'info', message: `nagent patch applied (${r.edits} edit${r.edits === 1 ? '' : 's'}).` };
  return { level: 'warning', message: `nagent patch was not applied${r.patchPath ? `; the diff is in ${r.patchPath}` : ''}.` };
}

export function statusText(s: StatusResult, launch?: string): string {
  const lines = [
    `nagent-lsp ${s.version ?? '?'}`,
    `model: ${s.model ?? '(none)'}${s.modelConfigured ? '' : ' — NOT configured (set nagent.baseUrl or the API key environment variable)'}`,
    `base URL: ${s.baseUrl ?? '(provider default)'}`,
    `state root: ${s.stateRoot ?? '(none)'}`,
    `settings from: ${(s.configSources ?? []).join(' < ') || '(defaults)'}`,
    `workspace folders: ${(s.workspaceFolders ?? []).join(', ') || '(none)'}`,
  ];
  if (launch) lines.push(`server: ${launch}`);
  return lines.join('\n');
}

export function statusSummary(s: StatusResult): string {
  return `nagent-lsp ${s.version ?? '?'} · model ${s.model ?? '(none)'}${s.modelConfigured ? '' : ' (not configured)'} · state ${s.stateRoot ?? '(none)'}`;
}

export interface PickItem {
  label: string;
  description?: string;
  detail?: string;
  target: string;
}

const LEVEL_ICON: Record<string, string> = { high: '$(flame)', medium: '$(arrow-both)', low: '$(dash)' };

export function coeditItems(rows: CoeditRow[], commits: number, resolve: (p: string) => string): PickItem[] {
  return rows.map((r) => ({
    label: `${LEVEL_ICON[r.level] ?? ''} ${r.path}`.trim(),
    description: `${r.level} · ${r.count}/${commits} commits (${Math.round((r.rate ?? 0) * 100)}%)`,
    target: resolve(r.path),
  }));
}

/**
 * A co-edit row's path may be absolute or relative to the repository root, which the coedits result
 * does not name: take the first ancestor folder of the file where it exists (else the file's folder).
 */
export function resolveRelatedPath(p: string, file: string, exists: (candidate: string) => boolean, root?: string | null): string {
  if (path.isAbsolute(p)) return p;
  if (root) {
    const c = path.join(root, p);
    if (exists(c)) return c;
  }
  let dir = path.dirname(file);
  for (;;) {
    const c = path.join(dir, p);
    if (exists(c)) return c;
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return path.join(root ?? path.dirname(file), p);
}

export interface SplitIndexInfo {
  indexPath: string;
  sourcePath: string;
  segmentCount: number;
  created?: string;
}

/** Read the fields we show from a split's index.json (nagent's snake_case layout). */
export function parseSplitIndex(indexPath: string, json: unknown): SplitIndexInfo | undefined {
  if (!json || typeof json !== 'object') return undefined;
  const o = json as Record<string, unknown>;
  const source = o.source_path ?? o.sourcePath;
  if (typeof source !== 'string') return undefined;
  const segs = Array.isArray(o.segments) ? o.segments.length : typeof o.segment_count === 'number' ? o.segment_count : 0;
  const created = typeof o.created_at === 'string' ? o.created_at : undefined;
  return { indexPath, sourcePath: source, segmentCount: segs, created };
}

export function splitIndexItems(infos: SplitIndexInfo[], activeFile?: string): PickItem[] {
  const sorted = [...infos].sort((a, b) => {
    const aa = a.sourcePath === activeFile ? 0 : 1;
    const bb = b.sourcePath === activeFile ? 0 : 1;
    return aa - bb || (b.created ?? '').localeCompare(a.created ?? '') || a.indexPath.localeCompare(b.indexPath);
  });
  return sorted.map((i) => ({
    label: path.basename(i.sourcePath),
    description: `${i.segmentCount} segment${i.segmentCount === 1 ? '' : 's'}${i.created ? ` · split ${i.created}` : ''}${i.sourcePath === activeFile ? ' · current file' : ''}`,
    detail: i.indexPath,
    target: i.indexPath,
  }));
}

export function isHashMismatch(message: string): boolean {
  return /hash/i.test(message) && /(match|changed|differ)/i.test(message);
}
