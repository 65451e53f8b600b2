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
  conversationSend: 'nagent.conversation.send',
  attributionAt: 'nagent.attribution.at',
  reviewList: 'nagent.review.list',
  reviewShow: 'nagent.review.show',
  reviewApply: 'nagent.review.apply',
  reviewDiscard: 'nagent.review.discard',
  agentsList: 'nagent.agents.list',
  recipesList: 'nagent.recipes.list',
  recipeRun: 'nagent.recipe.run',
  trustStatus: 'nagent.trust.status',
  trust: 'nagent.trust',
  trustRevoke: 'nagent.trust.revoke',
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
  /** Provider-reported cached input tokens (DESIGN §11). */
  cacheRead?: number;
  /** Tokens spent on folding memory (DESIGN §11). */
  memory?: number;
  /** Cost in US dollars, when the model profile has a price. */
  cost?: number | null;
}

export interface FileChangeSummary {
  uri: string;
  edits: number;
  created: boolean;
}

export interface EditResult {
  applied: boolean;
  response: string;
  edits: number;
  conversation: { path: string; fileId: string };
  tokens: Tokens;
  patchPath?: string | null;
  reason?: string | null;
  /** Every file of the change set (DESIGN §9). */
  files?: FileChangeSummary[];
  /** Set when the change awaits review: the proposal id (or the proposal itself). */
  proposal?: string | ProposalRef | null;
  /** Set when a `range` was given and the run changed lines outside it. */
  outsideSelection?: boolean;
  outsideLines?: OutsideLines[];
  /** One human line formatted by the server (contract D): shown verbatim. */
  message?: string;
  /** Files that usually change with the target and were not touched (contract B). */
  coupling?: Coupling[];
  historyWarnings?: { uri: string; line: number; message: string }[];
  /** `@path` mentions of the request (contract D). */
  mentions?: Mention[];
  /** nagent.conversation.send: the request taken from the conversation's draft. */
  request?: string;
}

export interface Coupling {
  uri: string;
  partner: string;
  partnerUri?: string;
  rate: number;
  commits: number;
  total: number;
  message: string;
}

export interface Mention {
  path: string;
  included: boolean;
  reason?: string | null;
}

/** Per file, the 0-based lines (of the text the run started from) changed outside the selection. */
export interface OutsideLines {
  uri: string;
  lines: number[];
}

/** What an edit result may carry as `proposal`: at least its id. */
export interface ProposalRef {
  id: string;
  [extra: string]: unknown;
}

export interface ProposalListItem {
  id: string;
  createdAt: string;
  request: string;
  conversation: string | { path: string; fileId?: string };
  files: { uri: string; hunks: number | unknown[] }[];
}
export interface ReviewListResult {
  proposals: ProposalListItem[];
}

export interface Hunk {
  id: string;
  range: LspRange;
  oldText: string;
  newText: string;
  /** false when the hunk's lines changed since it was proposed. */
  applies?: boolean;
  /** History warnings (contract B): "changes lines from abc1234 'Fix race…' (Alice, 3 days ago)". */
  warnings?: string[];
}
export interface ProposalFile {
  uri: string;
  path: string;
  created: boolean;
  hunks: Hunk[];
}
export interface Proposal {
  id: string;
  request: string;
  files: ProposalFile[];
  response?: string;
  coupling?: Coupling[];
  [extra: string]: unknown;
}
export interface ReviewApplyResult {
  applied: boolean;
  edits: number;
  files: unknown[];
  rejected: string[];
  conflicts: string[];
  pending?: string[];
}
export interface ReviewDiscardResult {
  rejected: string[];
  pending?: string[];
}

export interface AgentInfo {
  name: string;
  description: string;
  source: 'builtin' | 'user' | 'workspace' | string;
  path?: string | null;
}
export interface AgentsListResult {
  agents: AgentInfo[];
  /** One message per bad or shadowed agent file. */
  problems?: string[];
}
export interface RecipeInfo {
  name: string;
  description: string;
  source: 'builtin' | 'user' | 'workspace' | string;
  path: string;
  steps: number | unknown[];
  /** The recipe uses `userRequest`: ask for one (else run at once). */
  needsRequest?: boolean;
}
export interface RecipesListResult {
  recipes: RecipeInfo[];
  problems?: string[];
}
export interface RecipeRunResult {
  outputs: Record<string, unknown>;
  response: string;
  applied: boolean;
  edits: number;
  proposal?: string | ProposalRef | null;
  tokens: Tokens;
  reason?: string | null;
  conversation?: { path: string; fileId: string };
  files?: FileChangeSummary[];
  outsideSelection?: boolean;
  outsideLines?: OutsideLines[];
  message?: string;
  coupling?: Coupling[];
  mentions?: Mention[];
}

export interface ConversationListResult {
  files: { fileId: string; path: string; conversation: string }[];
}

/** The id of the proposal an edit/recipe result announces, if any. */
export function proposalId(p: string | ProposalRef | null | undefined): string | undefined {
  if (!p) return undefined;
  if (typeof p === 'string') return p;
  return typeof p.id === 'string' ? p.id : undefined;
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

/** `nagent.trust.status` / `nagent.trust` / `nagent.trust.revoke`: the user's trust in a repository's definitions. */
export interface TrustResult {
  stateRoot: string;
  trusted: boolean;
  /** Hash of the repository's definitions; null when it defines nothing. */
  hash: string | null;
  /** The files the hash covers, relative to the state root. */
  files: string[];
  /** The user trusted an earlier version of these files (any change revokes the trust). */
  changedSinceTrusted: boolean;
  message: string;
}

export interface ConversationOpenResult {
  path: string;
  shown: boolean;
  /** 0-based line where the next request (the draft) is typed (contract D). */
  draftLine?: number;
}

/** nagent.attribution.at (contract C). */
export interface Attribution {
  source: 'nagent' | 'notes' | 'git' | string;
  tool?: string | null;
  model?: string | null;
  agent?: string | null;
  sessionId?: string | null;
  conversationPath?: string | null;
  conversationUri?: string | null;
  turn?: number | null;
  /** 0-based line of that turn in the conversation file. */
  conversationLine?: number | null;
  request?: string | null;
  time?: string | null;
  commit?: string | null;
  message: string;
}
export interface AttributionResult {
  attribution: Attribution | null;
}

/** nagent.stream notification params (contract A). */
export interface StreamParams {
  token: string | number | null;
  uri: string;
  delta: string;
  turn: number;
  done?: boolean;
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
