/** Text the extension shows: status bar, notifications, quick picks. Pure and unit-tested. */
import * as path from 'path';
import type { CoeditRow, EditResult, OutsideLines, PatchResult, RecipeRunResult, StatusResult, Tokens } from './protocol';
import { proposalId } from './protocol';

export function formatCount(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return '?';
  const v = Math.max(0, Math.round(n));
  if (v < 1000) return String(v);
  if (v < 10_000) return `${(v / 1000).toFixed(1).replace(/\.0$/, '')}k`;
  if (v < 1_000_000) return `${Math.round(v / 1000)}k`;
  return `${(v / 1_000_000).toFixed(1).replace(/\.0$/, '')}M`;
}

/** A cost in US dollars (the server's unit, issue 25 "cost has no unit"): 4 decimals below 0.01, else 2. */
export function formatCost(cost: number | undefined | null): string {
  if (cost === undefined || cost === null || !Number.isFinite(cost) || cost < 0) return '';
  if (cost === 0) return '$0';
  return '$' + (cost < 0.01 ? cost.toFixed(4) : cost.toFixed(2));
}

export function formatTokens(t: Tokens | undefined | null): string {
  if (!t) return '';
  const turns = typeof t.turns === 'number' ? `${t.turns} turn${t.turns === 1 ? '' : 's'}, ` : '';
  let s = `${turns}${formatCount(t.input)} in / ${formatCount(t.output)} out tokens`;
  if (typeof t.cacheRead === 'number' && t.cacheRead > 0) s += `, ${formatCount(t.cacheRead)} cached`;
  if (typeof t.memory === 'number' && t.memory > 0) s += `, ${formatCount(t.memory)} memory`;
  const cost = formatCost(t.cost);
  if (cost) s += `, cost ${cost}`;
  return s;
}

/** True when a result's tokens say nothing happened (a run cancelled before the model answered). */
export function isEmptyTokens(t: Tokens | undefined | null): boolean {
  return !t || ((t.input ?? 0) === 0 && (t.output ?? 0) === 0 && !t.cost);
}

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';

export interface StatusBarView {
  text: string;
  tooltip: string;
}

/**
 * Status bar: `$(hubot) <model> · 1.2k↑ 300↓ · 0.0042` (the tokens and cost of the last run), or
 * `$(sync~spin) <model> · <what is running>` while a run is in flight.
 */
export function statusBarView(
  state: ServerState,
  model: string | null | undefined,
  last?: Tokens | null,
  configured = true,
  running?: string,
): StatusBarView {
  if (running && state === 'running') {
    return {
      text: `$(sync~spin) ${model || 'nagent'} · ${running}`,
      tooltip: `nagent is working: ${running}\nCancel it from its progress notification.${last ? `\nLast run: ${formatTokens(last)}` : ''}`,
    };
  }
  if (state === 'starting') return { text: '$(sync~spin) nagent', tooltip: 'nagent: starting the server…' };
  if (state === 'failed') return { text: '$(error) nagent', tooltip: 'nagent: the server is not running. Click for status.' };
  if (state === 'stopped') return { text: '$(circle-slash) nagent', tooltip: 'nagent: the server is stopped. Click for status.' };
  const name = model || 'no model';
  let text = `$(hubot) ${name}${configured ? '' : ' (not configured)'}`;
  let tooltip = `nagent model: ${name}${configured ? '' : ' — no API key or base URL configured'}`;
  if (last) {
    text += ` · ${formatCount(last.input)}↑ ${formatCount(last.output)}↓`;
    const cost = formatCost(last.cost);
    if (cost) text += ` · ${cost}`;
    tooltip += `\nLast run: ${formatTokens(last)}`;
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

/** 0-based line numbers as people read them: 1-based, sorted, runs compressed (`3, 10–12`). */
export function lineRanges(lines: number[]): string {
  const sorted = [...new Set(lines.filter((n) => Number.isInteger(n) && n >= 0))].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(j === i ? `${sorted[i] + 1}` : `${sorted[i] + 1}–${sorted[j] + 1}`);
    i = j + 1;
  }
  return parts.join(', ');
}

/** The last path segment of a URI, decoded. */
export function uriBaseName(uri: string): string {
  const p = uri.replace(/[?#].*$/, '').replace(/\/+$/, '');
  try {
    return decodeURIComponent(p.slice(p.lastIndexOf('/') + 1));
  } catch {
    return p.slice(p.lastIndexOf('/') + 1);
  }
}

/**
 * A result's `outsideLines` as one warning line:
 * `nagent also changed lines outside the selection: app.py 3, 10–12; util.py 1–4` ('' when there are none).
 * `name` shortens a file's URI (default: its base name); the line is cut to `max` characters with `…`.
 */
export function outsideSelectionText(outside: OutsideLines[] | undefined | null, name: (uri: string) => string = uriBaseName, max = 160): string {
  const files = (outside ?? []).filter((f) => f && Array.isArray(f.lines) && f.lines.length > 0);
  if (files.length === 0) return '';
  const text = `nagent also changed lines outside the selection: ${files.map((f) => `${name(f.uri)} ${lineRanges(f.lines)}`).join('; ')}`;
  if (text.length <= max) return text;
  const cut = text.slice(0, max - 1);
  const at = Math.max(cut.lastIndexOf(', '), cut.lastIndexOf('; '));
  return `${at > 0 ? cut.slice(0, at) : cut}, …`;
}

/** The notice of an edit; `outside` (outsideSelectionText) makes it a warning that says so first. */
export function editNotice(r: EditResult, outside = ''): Notice {
  const n = plainEditNotice(r);
  return outside ? { level: 'warning', message: `${outside}. ${n.message}` } : n;
}

function plainEditNotice(r: EditResult): Notice {
  if (typeof r.message === 'string' && r.message.trim()) {
    // the server formats the line once for every editor (contract D): shown verbatim
    const failed = !r.applied && !proposalId(r.proposal) && !isAnswerOnly(r);
    return { level: failed ? 'warning' : 'info', message: /^nagent\b/i.test(r.message) ? r.message : `nagent: ${r.message}` };
  }
  const tokens = r.tokens ? ` (${formatTokens(r.tokens)})` : '';
  const response = firstLine(r.response);
  if (!r.applied && proposalId(r.proposal)) {
    const files = r.files?.length ?? 0;
    return {
      level: 'info',
      message: `nagent proposes changes${files > 1 ? ` to ${files} files` : ''} for review${response ? `: ${response}` : '.'}${tokens}`,
    };
  }
  if (r.applied) {
    const n = r.edits ?? 0;
    return {
      level: 'info',
      message: `nagent applied ${n} edit${n === 1 ? '' : 's'}${response ? `: ${response}` : '.'}${tokens}`,
    };
  }
  if (isAnswerOnly(r)) {
    // a plan/explain answer, or a request that needed no change: an answer, not a failure
    return { level: 'info', message: `nagent answered${response ? `: ${response}` : '.'}${tokens}` };
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
  const c = o.created_at ?? o.created;
  const created = typeof c === 'string' ? c : undefined;
  return { indexPath, sourcePath: source, segmentCount: segs, created };
}

export function splitIndexItems(infos: SplitIndexInfo[], activeFile?: string, now: Date = new Date()): PickItem[] {
  const sorted = [...infos].sort((a, b) => {
    const aa = a.sourcePath === activeFile ? 0 : 1;
    const bb = b.sourcePath === activeFile ? 0 : 1;
    return aa - bb || (b.created ?? '').localeCompare(a.created ?? '') || a.indexPath.localeCompare(b.indexPath);
  });
  return sorted.map((i) => ({
    label: path.basename(i.sourcePath),
    description: `${i.segmentCount} segment${i.segmentCount === 1 ? '' : 's'}${i.created ? ` · split ${formatDate(i.created, now)}` : ''}${i.sourcePath === activeFile ? ' · current file' : ''}`,
    detail: i.indexPath,
    target: i.indexPath,
  }));
}

export function isHashMismatch(message: string): boolean {
  return /hash/i.test(message) && /(match|changed|differ)/i.test(message);
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * A timestamp (ISO 8601, or seconds/milliseconds since the epoch) as people read it, in local
 * time: `today 14:05`, `yesterday 09:30`, `3 Mar 14:05` this year, else `3 Mar 2024`.
 * Unparseable input is returned as it came.
 */
export function formatDate(value: string | number, now: Date = new Date()): string {
  let d: Date;
  if (typeof value === 'number' || /^\d+(\.\d+)?$/.test(String(value))) {
    const n = Number(value);
    d = new Date(n < 1e12 ? n * 1000 : n);
  } else {
    d = new Date(value);
  }
  if (Number.isNaN(d.getTime())) return String(value);
  const hhmm = `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
  const day = (x: Date) => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
  const days = Math.round((day(now) - day(d)) / 86_400_000);
  if (days === 0) return `today ${hhmm}`;
  if (days === 1) return `yesterday ${hhmm}`;
  if (d.getFullYear() === now.getFullYear()) return `${d.getDate()} ${MONTHS[d.getMonth()]} ${hhmm}`;
  return `${d.getDate()} ${MONTHS[d.getMonth()]} ${d.getFullYear()}`;
}

/** One answer as the Answers panel shows it (Markdown). */
export interface AnswerEntry {
  /** One run's entry (its proposal id, or the stream's token): later updates replace it, see upsertAnswer. */
  key?: string;
  /** e.g. "Edit", "Recipe tests", "Review" */
  kind: string;
  /** Extra lines shown as warnings: coupled files not touched, recent fixes, mentions not included. */
  warnings?: string[];
  /** Still arriving (nagent/stream). */
  streaming?: boolean;
  file: string;
  request?: string;
  response: string;
  tokens?: Tokens | null;
  outcome?: string;
  outputs?: Record<string, unknown>;
  files?: { uri: string; edits: number; created: boolean }[];
  /** outsideSelectionText of the run, shown as a warning line. */
  outside?: string;
  time: Date;
}

export function answerMarkdown(a: AnswerEntry): string {
  const out: string[] = [];
  out.push(`### ${a.kind} · ${mdEscape(path.basename(a.file))} · ${formatDate(a.time.toISOString(), a.time)}`);
  if (a.request) out.push(`> ${mdEscape(a.request).replace(/\n/g, '\n> ')}`);
  out.push(a.response.trim() ? a.response.trim() : '_(no answer text)_');
  if (a.streaming) out.push('_… answering_');
  if (a.outside) out.push(`**⚠ ${mdEscape(a.outside)}**`);
  for (const w of a.warnings ?? []) out.push(`⚠ ${mdEscape(w)}`);
  if (a.outputs && Object.keys(a.outputs).length > 0) {
    out.push('**Outputs**');
    for (const [k, v] of Object.entries(a.outputs)) {
      const text = typeof v === 'string' ? v : JSON.stringify(v, null, 2);
      const fence = text.includes('```') ? '~~~~' : '```';
      out.push(`\`${k}\`\n\n${fence}\n${text.length > 4000 ? text.slice(0, 4000) + '\n…' : text}\n${fence}`);
    }
  }
  if (a.files && a.files.length > 1) {
    out.push(a.files.map((f) => `- ${mdEscape(decodeURIComponent(path.basename(f.uri)))}: ${f.edits} edit${f.edits === 1 ? '' : 's'}${f.created ? ' (new file)' : ''}`).join('\n'));
  }
  const meta: string[] = [];
  if (a.outcome) meta.push(a.outcome);
  if (a.tokens) meta.push(formatTokens(a.tokens));
  if (meta.length) out.push(`_${meta.map(mdEscape).join(' · ')}_`);
  return out.join('\n\n');
}

export function editOutcome(r: EditResult | RecipeRunResult): string {
  if (r.applied) return `applied ${r.edits ?? 0} edit${r.edits === 1 ? '' : 's'}`;
  if (proposalId(r.proposal)) return 'awaiting review';
  if (isAnswerOnly(r)) return 'answered, no file changed';
  return r.reason ? `not applied: ${r.reason}` : 'no change';
}

/** A run that answered without changing a file (plan/explain agents and recipes, questions): not a failure. */
export function isAnswerOnly(r: EditResult | RecipeRunResult): boolean {
  return !r.applied && !proposalId(r.proposal) && (!r.reason || /^no change/i.test(r.reason));
}

/**
 * Put an answer at the top of the list. An entry with the same `key` (one run: its edit, its proposal,
 * its review) is updated in place instead of added again (issue 25: "the Answers panel triples entries
 * for one reviewed run"); fields the update leaves empty keep their value.
 */
export function upsertAnswer(list: AnswerEntry[], entry: AnswerEntry, max = 20): AnswerEntry[] {
  const i = entry.key ? list.findIndex((a) => a.key === entry.key) : -1;
  let merged = entry;
  if (i >= 0) {
    const old = list[i];
    merged = { ...old };
    for (const [k, v] of Object.entries(entry) as [keyof AnswerEntry, unknown][]) {
      if (v === undefined || v === '' || (Array.isArray(v) && v.length === 0)) continue;
      (merged as unknown as Record<string, unknown>)[k] = v;
    }
    merged.kind = old.kind;
  }
  const rest = list.filter((_, j) => j !== i);
  return [merged, ...rest].slice(0, max);
}

function mdEscape(s: string): string {
  return s.replace(/([\\`*_[\]<>])/g, '\\$1');
}
