/**
 * The server contract (DESIGN §4) as TypeScript types, plus the argument builders.
 * Every server command takes ONE JSON object as its single argument.
 */

export const ServerCommands = {
  status: 'nagent.status',
  edit: 'nagent.edit',
  history: 'nagent.history',
  coedits: 'nagent.coedits',
  split: 'nagent.split',
  patch: 'nagent.patch',
  summarize: 'nagent.summarize',
  conversationOpen: 'nagent.conversation.open',
  conversationList: 'nagent.conversation.list',
  conversationClear: 'nagent.conversation.clear',
  conversationSave: 'nagent.conversation.save',
  conversationLoad: 'nagent.conversation.load',
  conversationSummarize: 'nagent.conversation.summarize',
  conversationCompact: 'nagent.conversation.compact',
} as const;
export type ServerCommand = (typeof ServerCommands)[keyof typeof ServerCommands];

export interface LspPosition {
  line: number;
  character: number;
}
export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}

export interface StatusResult {
  version: string;
  stateRoot: string | null;
  model: string | null;
  baseUrl: string | null;
  modelConfigured: boolean;
  configSources: string[];
  workspaceFolders: string[];
  [extra: string]: unknown;
}

export interface Tokens {
  input: number;
  output: number;
  turns?: number;
}

export interface EditResult {
  applied: boolean;
  response: string;
  edits: number;
  conversation: { path: string; fileId: string };
  tokens: Tokens;
  patchPath?: string | null;
  reason?: string | null;
}

export interface HistoryCommit {
  hash: string;
  short: string;
  date: string;
  author: string;
  email: string;
  subject: string;
  summary?: string | null;
}
export interface HistoryResult {
  file: string;
  repository: string | null;
  commits: HistoryCommit[];
  authors: { name: string; email: string; commits: number }[];
  coedits: unknown[];
  markdown: string;
}

export interface CoeditRow {
  path: string;
  count: number;
  rate: number;
  level: 'high' | 'medium' | 'low' | string;
}
export interface CoeditsResult {
  file: string;
  commits: number;
  rows: CoeditRow[];
}

export interface SplitResult {
  indexPath: string;
  splitType: string;
  sha256: string;
  segments: { index: number; startLine: number; endLine: number; path: string }[];
}

export interface PatchResult {
  changed: boolean;
  applied: boolean;
  uri: string;
  edits: number;
  patchPath: string | null;
}

export interface SummarizeResult {
  summary: string;
  mode: 'inline' | 'split' | string;
  cached: boolean;
}

export interface ConversationOpenResult {
  path: string;
  shown: boolean;
}
export interface ConversationClearResult {
  archivedPath: string | null;
}

export function editArgs(uri: string, request: string, range?: LspRange, preview?: boolean): Record<string, unknown> {
  const args: Record<string, unknown> = { uri, request };
  if (range && !isEmptyRange(range)) args.range = range;
  if (preview !== undefined) args.preview = preview;
  return args;
}

export function isEmptyRange(r: LspRange): boolean {
  return r.start.line === r.end.line && r.start.character === r.end.character;
}

/** The `executeCommand` params: one object argument. */
export function executeParams(command: ServerCommand | string, arg: Record<string, unknown> = {}): {
  command: string;
  arguments: [Record<string, unknown>];
} {
  return { command, arguments: [arg] };
}
