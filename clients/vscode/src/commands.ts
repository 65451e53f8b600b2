/** The extension's own commands (`nagent.vscode.*`), each a thin layer over one server command. */
import * as fs from 'fs';
import * as path from 'path';
import type * as vscode from 'vscode';
import { NagentClient } from './client';
import { ConversationSupport } from './conversation';
import { MarkdownPanels } from './markdownPanel';
import { mentionText, trailingRequest } from './pure/conversation';
import { CONVERSATION_SCHEME, conversationFileUri } from './conversationFs';
import { isConversationDocument } from './conversation';
import { InlineReview } from './inlineReview';
import { ReviewController } from './review';
import { StreamAnswers } from './pure/stream';
import * as api from './vscodeapi';
import {
  AnswerEntry,
  answerMarkdown,
  coeditItems,
  editNotice,
  editOutcome,
  outsideSelectionText,
  errorMessage,
  firstLine,
  isCancellation,
  isHashMismatch,
  mentionsModelSetup,
  Notice,
  parseSplitIndex,
  patchNotice,
  PickItem,
  resolveRelatedPath,
  SplitIndexInfo,
  splitIndexItems,
  statusSummary,
  statusText,
  upsertAnswer,
} from './pure/format';
import { runWarnings, withWarnings } from './pure/runNotes';
import {
  AgentsListResult,
  CoeditsResult,
  ConversationListResult,
  ConversationClearResult,
  ConversationOpenResult,
  editArgs,
  EditResult,
  HistoryResult,
  LspRange,
  PatchResult,
  proposalId,
  RecipeRunResult,
  RecipesListResult,
  ServerCommands,
  SplitResult,
  StatusResult,
  SummarizeResult,
  TrustResult,
  AttributionResult,
  StreamParams,
} from './pure/protocol';
import { alreadyTrusted, nothingToTrust, trustArgs, trustOutcome, trustPrompt } from './pure/trust';
import { describeLaunch } from './pure/serverCommand';
import { Commands } from './pure/ids';
import { DocumentSnapshot, TestReporter } from './pure/testReport';
import { viewSubject, ViewProvider } from './views';

const SPLITS_KEY = 'nagent.splitIndexes';
const MAX_ANSWERS = 20;

/** A failure we explain to the user without the server's involvement. */
class UserFacing extends Error {}
/** The user dismissed an input: no error, no notification. */
class Dismissed extends Error {}

export class CommandHandlers {
  readonly panels: MarkdownPanels;
  readonly review: ReviewController;
  readonly inline: InlineReview;
  /** Live answers (nagent/stream), one per run. */
  readonly streams = new StreamAnswers();
  private streamTimer: ReturnType<typeof setTimeout> | undefined;
  private runSeq = 0;
  readonly conversations: ConversationSupport;
  private answers: AnswerEntry[] = [];

  constructor(
    private readonly ctx: vscode.ExtensionContext,
    private readonly nc: NagentClient,
    private readonly views: ViewProvider,
    private readonly reporter: TestReporter,
  ) {
    this.panels = new MarkdownPanels((p) => this.report('panel', true, { key: p.key, title: p.title, markdown: p.markdown, rendered: p.rendered, displayed: p.displayed }));
    this.conversations = new ConversationSupport(nc.log);
    this.review = new ReviewController({
      request: (command, arg) => this.nc.request(command, arg),
      withConversationSync: (fn) => this.conversations.withSync(fn),
      showAnswer: (kind, file, request, response, outcome, key, warnings) => this.showAnswer({ key, kind, file, request, response, outcome, warnings, time: new Date() }),
      revealAnswers: async () => {
        if (this.answers.length) await this.showAnswers(true);
      },
      notify: (level, message) => this.notify({ level, message }),
      report: (event, ok, result, extra) => this.report(event, ok, result, undefined, false, extra),
      decided: (id) => this.inline.load(id),
      log: nc.log,
    });
    this.inline = new InlineReview({
      request: (command, arg) => this.nc.request(command, arg),
      withConversationSync: (fn) => this.conversations.withSync(fn),
      forgetDiff: (id) => this.review.forget(id),
      notify: (level, message) => this.notify({ level, message }),
      report: (event, ok, result) => this.report(event, ok, result),
      log: nc.log,
    });
  }

  register(): vscode.Disposable[] {
    const table: [string, (...args: unknown[]) => Promise<unknown>][] = [
      [Commands.editSelection, (a) => this.editSelection(a)],
      [Commands.editFile, (a) => this.editFile(a)],
      [Commands.editWithAgent, (a) => this.editWithAgent(a)],
      [Commands.runRecipe, (a) => this.runRecipe(a)],
      [Commands.reviewProposals, (a, b) => this.reviewProposals(a, b)],
      [Commands.acceptHunk, (a, b, c) => this.review.decide(String(a), String(b), c === 'undo' ? 'undo' : 'accept')],
      [Commands.rejectHunk, (a, b) => this.review.decide(String(a), String(b), 'reject')],
      [Commands.acceptHunkAtCursor, (a, b) => this.decideAtCursor('accept', a, b)],
      [Commands.rejectHunkAtCursor, (a, b) => this.decideAtCursor('reject', a, b)],
      [Commands.listChangedFiles, () => this.listChangedFiles()],
      [Commands.editWithModel, (a) => this.editWithModel(a)],
      [Commands.insertMention, () => this.insertMention()],
      [Commands.conversationSave, (a) => this.conversationSave(a)],
      [Commands.conversationLoad, (a) => this.conversationLoad(a)],
      [Commands.conversationCompact, (a) => this.conversationCompact(a)],
      [Commands.conversationSummarize, (a) => this.conversationSummarize(a)],
      [Commands.conversationList, () => this.conversationList()],
      [Commands.openAttribution, (a) => this.openAttribution(a)],
      [Commands.acceptAll, (a) => this.review.decideAll(typeof a === 'string' ? a : undefined, 'accept')],
      [Commands.rejectAll, (a) => this.review.decideAll(typeof a === 'string' ? a : undefined, 'reject')],
      [Commands.showAnswer, () => this.showAnswers(false)],
      [Commands.sendFromConversation, (a) => this.sendFromConversation(a)],
      [Commands.openConversation, (a) => this.openConversation(a)],
      [Commands.showHistory, (a) => this.showHistory(a)],
      [Commands.showCoedits, (a) => this.showCoedits(a)],
      [Commands.split, (a) => this.split(a)],
      [Commands.patch, () => this.patch()],
      [Commands.summarize, (a) => this.summarize(a)],
      [Commands.clearConversation, (a) => this.clearConversation(a)],
      [Commands.showStatus, () => this.showStatus()],
      [Commands.restart, () => this.restart()],
      [Commands.showLog, async () => this.nc.log.show()],
      [Commands.trustRepository, () => this.trustRepository()],
      [Commands.revokeRepositoryTrust, () => this.revokeRepositoryTrust()],
    ];
    const disposables = table.map(([id, fn]) => api.commands.register(id, (...args: unknown[]) => this.run(id, () => fn(...args))));
    return [...disposables, this.panels, this.review, this.inline, this.conversations];
  }

  /** Run one command: errors become notifications; the test hook records the outcome. */
  private async run(id: string, fn: () => Promise<unknown>): Promise<unknown> {
    let result: unknown;
    let error: unknown;
    let dismissed = false;
    try {
      result = await fn();
    } catch (e) {
      if (e instanceof Dismissed) dismissed = true;
      else {
        error = e;
        if (!isCancellation(e)) this.showError(e);
      }
    }
    this.report(id, error === undefined, result, error, dismissed);
    return result;
  }

  report(event: string, ok: boolean, result?: unknown, error?: unknown, dismissed = false, extra: Record<string, unknown> = {}): void {
    if (!this.reporter.enabled) return;
    try {
      const ed = api.activeEditor();
      this.reporter.write({
        event,
        ok,
        dismissed,
        result,
        error: error === undefined ? undefined : errorMessage(error),
        activeDocument: ed ? snapshot(ed.document) : undefined,
        activeEditor: ed
          ? { visibleRanges: ed.visibleRanges.map((r) => [r.start.line, r.end.line]), selection: [ed.selection.active.line, ed.selection.active.character] }
          : undefined,
        pendingReviews: this.review?.pending(),
        statusBar: this.nc.statusBar.text,
        visibleDocuments: api.visibleEditors().map((e) => docName(e.document)),
        ...extra,
      });
    } catch (e) {
      this.nc.log.warn(`test report: ${errorMessage(e)}`);
    }
  }

  showError(e: unknown): void {
    const full = errorMessage(e);
    // one clear line in the notification; anything longer (a server's details) goes to the log
    const msg = firstLine(full, 400);
    if (msg !== full.trim()) this.nc.log.error(full);
    const text = /^nagent\b/i.test(msg) ? msg : `nagent: ${msg}`;
    const actions = mentionsModelSetup(msg) ? ['Open Settings', 'Show Log'] : ['Show Log'];
    void api.showErrorMessage(text, ...actions).then((choice) => {
      if (choice === 'Open Settings') void api.commands.execute('workbench.action.openSettings', 'nagent.');
      if (choice === 'Show Log') this.nc.log.show();
    });
  }

  private notify(n: Notice, ...actions: { title: string; run: () => unknown }[]): void {
    const show = n.level === 'info' ? api.showInformationMessage : api.showWarningMessage;
    void show(n.message, ...actions.map((a) => a.title)).then((choice) => {
      actions.find((a) => a.title === choice)?.run();
    });
  }

  // ----- targets -------------------------------------------------------------------------------

  /** The editor a command works on: a Uri argument (context menus) or the active editor. */
  private async target(arg: unknown): Promise<vscode.TextEditor> {
    if (arg instanceof api.Uri) {
      const active = api.activeEditor();
      if (active && active.document.uri.toString() === arg.toString()) return active;
      return reveal(arg);
    }
    const ed = api.activeEditor();
    if (!ed) throw new UserFacing('open a file first: this command works on the active editor');
    const about = viewSubject(ed.document.uri) ?? (ed.document.uri.scheme === 'nagent-proposal' ? api.Uri.parse(new URLSearchParams(ed.document.uri.query).get('file') ?? '') : undefined);
    if (about) {
      // a History/Summary view: work on the file it is about
      return reveal(about);
    }
    if (ed.document.uri.scheme !== 'file' && ed.document.uri.scheme !== 'untitled') {
      throw new UserFacing(`this command works on files, not on ${ed.document.uri.scheme}: documents`);
    }
    return ed;
  }

  private async askRequest(title: string, what: string): Promise<string> {
    const request = await api.showInputBox({
      title,
      prompt: `What should nagent do with ${what}?`,
      placeHolder: 'e.g. add retries with exponential backoff',
      ignoreFocusOut: true,
    });
    if (request === undefined || request.trim() === '') throw new Dismissed();
    return request.trim();
  }

  // ----- edits ---------------------------------------------------------------------------------

  async editSelection(arg: unknown): Promise<EditResult> {
    const ed = await this.target(arg);
    const sel = ed.selection;
    const empty = sel.isEmpty;
    const request = await this.askRequest('nagent: Edit Selection', empty ? 'this file (nothing is selected)' : 'the selection');
    return this.runEdit(ed.document, request, empty ? undefined : toLspRange(sel));
  }

  async editFile(arg: unknown): Promise<EditResult> {
    const ed = await this.target(arg);
    const request = await this.askRequest('nagent: Edit File', path.basename(ed.document.fileName));
    return this.runEdit(ed.document, request);
  }

  async runEdit(doc: vscode.TextDocument, request: string, range?: LspRange, extra: Record<string, unknown> = {}): Promise<EditResult> {
    const args = { ...extra, ...editArgs(doc.uri.toString(), request, range) };
    const before = doc.getText();
    const label = typeof extra.agent === 'string' ? `${extra.agent}: ${request}` : request;
    let result: EditResult;
    try {
      result = await this.nc.working(`editing ${path.basename(doc.fileName)}`, () =>
        this.conversations.withSync(() => this.nc.request<EditResult>(ServerCommands.edit, args)),
      );
    } catch (e) {
      if (this.finishStream(doc.uri.toString())) void this.showAnswers(true);
      throw e;
    }
    await this.presentEdit(result, doc.uri, label, before, 'Edit', this.finishStream(doc.uri.toString()));
    return result;
  }

  /** The answer beside the editor, the notification, and the review when the change awaits one. */
  async presentEdit(result: EditResult | RecipeRunResult, file: vscode.Uri | undefined, request: string | undefined, before?: string, kind = 'Edit', streamKey?: string): Promise<void> {
    this.nc.noteTokens(result.tokens);
    if (result.response) this.nc.log.info(`nagent response:\n${result.response}`);
    const fileName = file ? file.fsPath || file.toString() : '';
    const outside = result.outsideSelection ? outsideSelectionText(result.outsideLines, api.relativeName) : '';
    if (outside) this.nc.log.warn(outside);
    streamKey ??= file ? this.finishStream(file.toString()) : undefined;
    const pid = proposalId(result.proposal);
    const created = result.applied ? (result.files ?? []).filter((f) => f.created) : [];
    const warnings = runWarnings(result, api.relativeName);
    if (created.length) warnings.unshift(`created ${created.map((f) => api.relativeName(f.uri)).join(', ')}`);
    if (streamKey && pid) this.answers = this.answers.map((a) => (a.key === streamKey ? { ...a, key: pid } : a));
    await this.showAnswer({
      key: pid ?? streamKey,
      kind,
      file: fileName,
      request,
      response: result.response ?? '',
      tokens: result.tokens,
      outcome: editOutcome(result),
      outputs: 'outputs' in result ? result.outputs : undefined,
      files: result.files,
      outside,
      warnings,
      streaming: false,
      time: new Date(),
    });
    for (const w of warnings) this.nc.log.info(`nagent: ${w}`);
    const notice = withWarnings(editNotice(result as EditResult, outside), warnings);
    if (!result.applied && pid) {
      this.notify(notice);
      await this.review.open(pid, result.response);
      await this.inline.load(pid);
      return;
    }
    // files the run created are named (above) and opened, so that the user sees them (issue 25)
    for (const f of created) {
      try {
        await api.showTextDocument(api.Uri.parse(f.uri), { preview: false, preserveFocus: true, viewColumn: api.ViewColumn.Beside });
      } catch (e) {
        this.nc.log.warn(`opening the created ${f.uri}: ${errorMessage(e)}`);
      }
    }
    const actions = [];
    if (result.applied && file && before !== undefined && file.scheme === 'file') {
      const snap = this.views.put('before', file, before);
      actions.push({ title: 'Show Diff', run: () => api.commands.execute('vscode.diff', snap, file, `${path.basename(file.fsPath)}: before ↔ after nagent`) });
    }
    const conv = result.conversation?.path;
    if (conv) actions.push({ title: 'Open Conversation', run: () => this.conversations.show(api.Uri.file(conv)) });
    this.notify(notice, ...actions);
  }

  async showAnswer(entry: AnswerEntry): Promise<void> {
    this.answers = upsertAnswer(this.answers, entry, MAX_ANSWERS);
    await this.showAnswers(true);
  }

  async showAnswers(preserveFocus: boolean): Promise<{ answers: number }> {
    const md = this.answers.length ? this.answers.map(answerMarkdown).join('\n\n---\n\n') : '_No answers yet: run "nagent: Edit Selection…"._';
    await this.panels.show('answers', 'nagent Answers', md, preserveFocus);
    return { answers: this.answers.length };
  }

  async editWithAgent(arg: unknown): Promise<EditResult> {
    const ed = await this.target(arg);
    const list = await this.nc.request<AgentsListResult>(ServerCommands.agentsList, { uri: ed.document.uri.toString() });
    const items = (list.agents ?? []).map((a) => ({
      label: a.name,
      description: a.source === 'builtin' ? 'built-in' : a.source,
      detail: a.description + (a.path ? ` — ${a.path}` : ''),
      name: a.name,
    }));
    if (items.length === 0 && !(list.problems ?? []).length) throw new UserFacing('the server lists no agents');
    const pick = await this.pickWithProblems(items, list.problems, { title: 'nagent: Edit with Agent', placeHolder: 'Pick the agent that handles the request', matchOnDetail: true });
    const sel = ed.selection;
    const request = await this.askRequest(`nagent: Edit with ${pick.name}`, sel.isEmpty ? path.basename(ed.document.fileName) : 'the selection');
    return this.runEdit(ed.document, request, sel.isEmpty ? undefined : toLspRange(sel), { agent: pick.name });
  }

  async runRecipe(arg: unknown): Promise<RecipeRunResult> {
    const ed = await this.target(arg);
    const list = await this.nc.request<RecipesListResult>(ServerCommands.recipesList, { uri: ed.document.uri.toString() });
    const recipes = list.recipes ?? [];
    if (recipes.length === 0 && !(list.problems ?? []).length) {
      throw new UserFacing('no recipes found: add one under ~/.nagent/recipes/ or <state root>/recipes/ (see the README)');
    }
    const items = recipes.map((r) => {
      const steps = Array.isArray(r.steps) ? r.steps.length : r.steps;
      return { label: r.name, description: `${r.source} · ${steps} step${steps === 1 ? '' : 's'}`, detail: r.description, name: r.name, needsRequest: r.needsRequest };
    });
    const pick = await this.pickWithProblems(items, list.problems, { title: 'nagent: Run Recipe', placeHolder: 'Pick a recipe to run on this file', matchOnDetail: true });
    // ask for a request only when the recipe uses one (needsRequest; an older server does not say: ask)
    let request = '';
    if (pick.needsRequest !== false) {
      const typed = await api.showInputBox({
        title: `nagent: Run Recipe ${pick.name}`,
        prompt: 'Request for the recipe (its userRequest; may be empty)',
        ignoreFocusOut: true,
      });
      if (typed === undefined) throw new Dismissed();
      request = typed;
    }
    const sel = ed.selection;
    const args: Record<string, unknown> = { uri: ed.document.uri.toString(), recipe: pick.name };
    if (request.trim()) args.request = request.trim();
    if (!sel.isEmpty) args.range = toLspRange(sel);
    const before = ed.document.getText();
    const result = await this.nc.working(`recipe ${pick.name}`, () =>
      this.conversations.withSync(() => this.nc.request<RecipeRunResult>(ServerCommands.recipeRun, args)),
    );
    await this.presentEdit(result, ed.document.uri, request.trim() || undefined, before, `Recipe ${pick.name}`, this.finishStream(ed.document.uri.toString()));
    return result;
  }

  async reviewProposals(id?: unknown, fileIndex?: unknown): Promise<unknown> {
    const target = typeof id === 'string' ? id : await this.review.pick(true);
    if (!target) throw new Dismissed();
    const proposal = await this.review.open(target, undefined, typeof fileIndex === 'number' ? fileIndex : undefined);
    await this.inline.load(target);
    return { id: proposal.id, files: proposal.files.map((f) => f.uri) };
  }

  /** Send the request typed at the end of the open conversation (or asked for) on the conversation's file. */
  async sendFromConversation(arg: unknown): Promise<EditResult> {
    const ed = arg instanceof api.Uri ? await reveal(arg) : api.activeEditor();
    if (!ed || (ed.document.uri.scheme !== 'file' && ed.document.uri.scheme !== CONVERSATION_SCHEME)) {
      throw new UserFacing('open a file conversation first ("nagent: Open File Conversation")');
    }
    if (this.nc.serverCommands().includes(ServerCommands.conversationSend)) return this.sendChat(ed);
    const convPath = ed.document.uri.fsPath;
    const list = await this.nc.request<ConversationListResult>(ServerCommands.conversationList, {});
    const entry = (list.files ?? []).find((f) => path.resolve(f.conversation) === path.resolve(convPath));
    if (!entry) throw new UserFacing(`${path.basename(convPath)} is not the conversation of any file nagent knows`);
    const fileUri = /^[a-z][\w+.-]*:/i.test(entry.path) && !path.isAbsolute(entry.path) ? api.Uri.parse(entry.path) : api.Uri.file(entry.path);
    const typed = trailingRequest(ed.document.getText());
    let request: string;
    if (typed) {
      request = typed.request;
      // the request goes in as a <user-prompt> block: take the typed text out of the buffer
      const edit = new api.WorkspaceEdit();
      edit.delete(ed.document.uri, new api.Range(ed.document.positionAt(typed.start), ed.document.positionAt(ed.document.getText().length)));
      await api.applyEdit(edit);
    } else {
      request = await this.askRequest('nagent: Send Request', path.basename(fileUri.fsPath));
    }
    const doc = await api.openTextDocument(fileUri);
    const result = await this.runEdit(doc, request);
    this.conversations.revealEndOf(ed.document.uri);
    return result;
  }


  /**
   * The conversation is the chat (issue 25): the text typed after its last record is the request.
   * nagent.conversation.send takes it out of the file and runs it on the conversation's source file.
   */
  private async sendChat(ed: vscode.TextEditor): Promise<EditResult> {
    const conv = conversationFileUri(ed.document.uri);
    if (!trailingRequest(ed.document.getText())) {
      throw new UserFacing('type a request at the end of the conversation, then press Ctrl+Enter');
    }
    // the conversation's source file: the run's target (its answer streams under that uri)
    const list = await this.nc.request<ConversationListResult>(ServerCommands.conversationList, {}).catch(() => ({ files: [] }) as ConversationListResult);
    const entry = (list.files ?? []).find((f) => path.resolve(f.conversation) === path.resolve(conv.fsPath));
    let target = entry ? (/^[a-z][\w+.-]*:/i.test(entry.path) && !path.isAbsolute(entry.path) ? api.Uri.parse(entry.path) : api.Uri.file(entry.path)) : undefined;
    let result: EditResult;
    try {
      result = await this.nc.working(`sending from ${path.basename(conv.fsPath)}`, () =>
        this.conversations.withSync(() => this.nc.request<EditResult>(ServerCommands.conversationSend, { uri: conv.toString() })),
      );
    } catch (e) {
      if (target && this.finishStream(target.toString())) void this.showAnswers(true);
      throw e;
    }
    if (!target && result.files?.[0]?.uri) target = api.Uri.parse(result.files[0].uri);
    await this.presentEdit(result, target, result.request, undefined, 'Chat');
    // the Answers panel beside may have re-wrapped the conversation: its end (the new turn) back in view
    this.conversations.revealEndOf(conv);
    return result;
  }

  // ----- streaming -----------------------------------------------------------------------------

  /**
   * The run on `uri` ended: its live entry gets a key of its own (a later run on the same file streams into
   * a new entry, never into this one) and stops saying "answering". Returns that key, if the run streamed.
   */
  finishStream(uri: string): string | undefined {
    const live = this.streams.take(uri);
    if (!live) return undefined;
    const key = `run:${++this.runSeq}`;
    this.answers = this.answers.map((a) => (a.key === live ? { ...a, key, streaming: false } : a));
    return key;
  }

  /** One `nagent/stream` notification: the run's answer so far, shown live in the Answers panel. */
  onStream(params: StreamParams): void {
    const live = this.streams.apply(params);
    if (!live) return;
    let file = live.uri;
    try {
      file = api.Uri.parse(live.uri).fsPath || live.uri;
    } catch {
      /* not a URI */
    }
    this.answers = upsertAnswer(this.answers, { key: live.key, kind: 'Edit', file, response: live.text, streaming: !live.done, time: new Date() }, MAX_ANSWERS);
    // many deltas a second: redraw the panel at most every 150 ms
    if (this.streamTimer) return;
    this.streamTimer = setTimeout(() => {
      this.streamTimer = undefined;
      void this.showAnswers(true).then(() => this.report('stream', true, { key: live.key, text: live.text, done: live.done, turn: live.turn }));
    }, 150);
  }

  // ----- review at the cursor ------------------------------------------------------------------

  /** Accept/reject the hunk at the cursor: in the proposal diff (collected) or in the file itself (sent at once). */
  async decideAtCursor(decision: 'accept' | 'reject', id?: unknown, hunkId?: unknown): Promise<unknown> {
    if (typeof id === 'string' && typeof hunkId === 'string') return this.inline.decide(id, hunkId, decision);
    const ed = api.activeEditor();
    if (!ed) throw new UserFacing('no editor: put the cursor on a proposed change');
    const inDiff = await this.review.hunkAt(ed.document.uri, ed.selection.active.line);
    if (inDiff) return this.review.decide(inDiff.id, inDiff.hunkId, decision);
    if (this.inline.pending().length === 0) await this.inline.loadAll();
    const h = this.inline.hunkAtCursor(ed);
    if (!h) throw new UserFacing(`no proposed change in ${path.basename(ed.document.fileName)}`);
    return this.inline.decide(h.proposalId, h.hunk.id, decision);
  }

  /** Every changed file of the pending proposals; opens the picked one at its first change. */
  async listChangedFiles(): Promise<{ files: string[]; picked?: string }> {
    if (this.inline.pending().length === 0) await this.inline.loadAll();
    const files = this.inline.files();
    if (files.length === 0) {
      this.notify({ level: 'info', message: 'nagent: no proposed changes are waiting for review.' });
      return { files: [] };
    }
    const items = files.map((f) => ({
      label: api.relativeName(f.uri),
      description: `${f.hunks} change${f.hunks === 1 ? '' : 's'}`,
      detail: `proposal ${f.proposalId}`,
      f,
    }));
    const pick = await api.showQuickPick(items, { title: 'nagent: Changed Files', placeHolder: 'Open a changed file at its first change' });
    if (!pick) return { files: files.map((f) => f.uri) };
    const pos = new api.Position(pick.f.line, 0);
    await api.showTextDocument(api.Uri.parse(pick.f.uri), { preview: false, selection: new api.Range(pos, pos) });
    return { files: files.map((f) => f.uri), picked: pick.f.uri };
  }

  // ----- model per request, mentions ------------------------------------------------------------

  /** Pick a model profile (nagent.status `profiles`) or an agent for this one request (issue 25). */
  async editWithModel(arg: unknown): Promise<EditResult> {
    const ed = await this.target(arg);
    const status = (await this.nc.refreshStatus()) ?? this.nc.status;
    const profiles = Array.isArray(status?.profiles) ? (status.profiles as unknown[]).filter((p): p is string => typeof p === 'string') : [];
    const agents = await this.nc.request<AgentsListResult>(ServerCommands.agentsList, { uri: ed.document.uri.toString() }).catch(() => ({ agents: [], problems: [] }) as AgentsListResult);
    type Item = vscode.QuickPickItem & { profile?: string; agent?: string };
    const items: Item[] = [];
    if (profiles.length) items.push({ label: 'Model profiles', kind: -1 } as Item);
    for (const p of profiles) items.push({ label: `$(hubot) ${p}`, description: p === status?.modelProfile ? 'current' : undefined, profile: p });
    if (agents.agents?.length) items.push({ label: 'Agents', kind: -1 } as Item);
    for (const a of agents.agents ?? []) items.push({ label: `$(person) ${a.name}`, description: a.source === 'builtin' ? 'built-in' : a.source, detail: a.description, agent: a.name });
    if (!items.some((i) => i.profile || i.agent)) throw new UserFacing('no model profiles (set nagent.models) and no agents to pick from');
    const pick = await api.showQuickPick(items, { title: 'nagent: Edit with Model', placeHolder: 'Pick a model profile or an agent for this request', matchOnDetail: true });
    if (!pick || (!pick.profile && !pick.agent)) throw new Dismissed();
    const chosen = pick.profile ?? pick.agent ?? '';
    const sel = ed.selection;
    const request = await this.askRequest(`nagent: Edit with ${chosen}`, sel.isEmpty ? path.basename(ed.document.fileName) : 'the selection');
    const extra: Record<string, unknown> = pick.profile ? { profile: pick.profile } : { agent: pick.agent };
    return this.runEdit(ed.document, request, sel.isEmpty ? undefined : toLspRange(sel), extra);
  }

  /** Insert `@path` (a workspace file picked from a list) at the cursor: the request includes that file. */
  async insertMention(): Promise<{ inserted?: string }> {
    const ed = api.activeEditor();
    if (!ed) throw new UserFacing('open the conversation (or a file) to mention a file in');
    const uris = await api.findFiles('**/*', '**/{node_modules,.git,.nagent,.venv,__pycache__}/**', 5000);
    const items = uris.map((u) => ({ label: api.relativeName(u.toString()), uri: u })).sort((a, b) => a.label.localeCompare(b.label));
    const pick = await api.showQuickPick(items, { title: 'nagent: Mention a File', placeHolder: 'The request will include this file (read through the confinement rules)' });
    if (!pick) throw new Dismissed();
    const text = mentionText(pick.label);
    await ed.edit((b) => {
      for (const s of ed.selections) b.replace(s, text);
    });
    return { inserted: text };
  }

  // ----- attribution -----------------------------------------------------------------------------

  /** `command:nagent.openAttribution?{"uri":…,"line":…}` from a hover: open the conversation at the turn that wrote the line. */
  async openAttribution(arg: unknown): Promise<AttributionResult> {
    const a = (arg && typeof arg === 'object' ? arg : {}) as { uri?: unknown; line?: unknown };
    const ed = api.activeEditor();
    const uri = typeof a.uri === 'string' ? a.uri : ed?.document.uri.toString();
    const line = typeof a.line === 'number' ? a.line : ed?.selection.active.line;
    if (!uri || line === undefined) throw new UserFacing('no line to look up: put the cursor on a line');
    const result = await this.nc.request<AttributionResult>(ServerCommands.attributionAt, { uri, line });
    const at = result.attribution;
    if (!at) {
      this.notify({ level: 'info', message: `nagent: line ${line + 1} of ${api.relativeName(uri)} has no recorded author.` });
      return result;
    }
    const conv = at.conversationUri ? api.Uri.parse(at.conversationUri) : at.conversationPath ? api.Uri.file(at.conversationPath) : undefined;
    if (!conv) {
      this.notify({ level: 'info', message: at.message });
      return result;
    }
    const editor = await this.conversations.show(conv);
    if (typeof at.conversationLine === 'number') {
      const pos = new api.Position(Math.min(at.conversationLine, editor.document.lineCount - 1), 0);
      editor.selection = new api.Selection(pos, pos);
      editor.revealRange(new api.Range(pos, pos), api.TextEditorRevealType.AtTop);
    }
    this.notify({ level: 'info', message: at.message });
    return result;
  }

  // ----- conversation management -----------------------------------------------------------------

  /** The file a conversation command is about: the active file, or — in a conversation — its source file. */
  private async conversationTarget(arg: unknown): Promise<{ uri: string; fileName: string }> {
    const active = api.activeEditor();
    if (!(arg instanceof api.Uri) && active && isConversationDocument(active.document)) {
      const convPath = active.document.uri.fsPath;
      const list = await this.nc.request<ConversationListResult>(ServerCommands.conversationList, {});
      const entry = (list.files ?? []).find((f) => path.resolve(f.conversation) === path.resolve(convPath));
      if (!entry) throw new UserFacing(`${path.basename(convPath)} is not the conversation of any file nagent knows`);
      const file = /^[a-z][\w+.-]*:/i.test(entry.path) && !path.isAbsolute(entry.path) ? api.Uri.parse(entry.path) : api.Uri.file(entry.path);
      return { uri: file.toString(), fileName: file.fsPath };
    }
    const ed = await this.target(arg);
    return { uri: ed.document.uri.toString(), fileName: ed.document.fileName };
  }

  async conversationSave(arg: unknown): Promise<{ path: string }> {
    const ed = await this.conversationTarget(arg);
    const name = await api.showInputBox({ title: 'nagent: Save Conversation As', prompt: `Name under which to save the conversation of ${path.basename(ed.fileName)}`, ignoreFocusOut: true });
    if (!name || !name.trim()) throw new Dismissed();
    const result = await this.nc.request<{ path: string }>(ServerCommands.conversationSave, { uri: ed.uri, name: name.trim() });
    this.notify({ level: 'info', message: `nagent: conversation saved as ${name.trim()}.` }, { title: 'Open', run: () => this.conversations.show(api.Uri.file(result.path)) });
    return result;
  }

  async conversationLoad(arg: unknown): Promise<{ path: string }> {
    const ed = await this.conversationTarget(arg);
    const saved = await this.savedConversations();
    let name: string | undefined;
    if (saved.length) {
      const pick = await api.showQuickPick(saved.map((n) => ({ label: n })), { title: 'nagent: Load Saved Conversation', placeHolder: `Continue ${path.basename(ed.fileName)} from a saved conversation` });
      name = pick?.label;
    } else {
      name = await api.showInputBox({ title: 'nagent: Load Saved Conversation', prompt: 'Name of the saved conversation', ignoreFocusOut: true });
    }
    if (!name || !name.trim()) throw new Dismissed();
    const result = await this.nc.request<{ path: string }>(ServerCommands.conversationLoad, { uri: ed.uri, name: name.trim() });
    await this.conversations.show(api.Uri.file(result.path));
    return result;
  }

  private async savedConversations(): Promise<string[]> {
    const root = this.nc.status?.stateRoot;
    if (!root) return [];
    try {
      return (await fs.promises.readdir(path.join(root, 'conversations', 'saved'))).filter((n) => !n.startsWith('.')).sort();
    } catch {
      return [];
    }
  }

  async conversationCompact(arg: unknown): Promise<Record<string, unknown>> {
    const ed = await this.conversationTarget(arg);
    const instruction = await api.showInputBox({ title: 'nagent: Compact Conversation', prompt: 'What the summary must keep (optional); the full conversation is archived first', ignoreFocusOut: true });
    if (instruction === undefined) throw new Dismissed();
    const args: Record<string, unknown> = { uri: ed.uri };
    if (instruction.trim()) args.instruction = instruction.trim();
    const result = await this.nc.working('compacting the conversation', () =>
      this.conversations.withSync(() => this.nc.request<Record<string, unknown>>(ServerCommands.conversationCompact, args)),
    );
    const before = typeof result.tokensBefore === 'number' ? result.tokensBefore : undefined;
    const after = typeof result.tokensAfter === 'number' ? result.tokensAfter : undefined;
    this.notify({ level: 'info', message: `nagent: conversation compacted${before !== undefined && after !== undefined ? ` (${before} → ${after} tokens)` : ''}.` });
    return result;
  }

  async conversationSummarize(arg: unknown): Promise<{ summary: string }> {
    const ed = await this.conversationTarget(arg);
    const result = await this.nc.working('summarizing the conversation', () =>
      this.nc.request<{ summary: string }>(ServerCommands.conversationSummarize, { uri: ed.uri }),
    );
    const name = path.basename(ed.fileName);
    await this.panels.show(`conversation-summary:${ed.uri}`, `Conversation Summary — ${name}`, `# Conversation of ${name}\n\n${result.summary}`, true);
    return result;
  }

  async conversationList(): Promise<{ files: number; picked?: string }> {
    const list = await this.nc.request<ConversationListResult>(ServerCommands.conversationList, {});
    const files = list.files ?? [];
    if (files.length === 0) {
      this.notify({ level: 'info', message: 'nagent: no conversations yet — run a request on a file first.' });
      return { files: 0 };
    }
    const items = files.map((f) => ({ label: api.relativeName(/^[a-z][\w+.-]*:/i.test(f.path) && !path.isAbsolute(f.path) ? f.path : api.Uri.file(f.path).toString()), detail: f.conversation, conversation: f.conversation }));
    const pick = await api.showQuickPick(items, { title: 'nagent: Conversations', placeHolder: 'Open the conversation of a file', matchOnDetail: true });
    if (!pick) return { files: files.length };
    await this.conversations.show(api.Uri.file(pick.conversation));
    return { files: files.length, picked: pick.conversation };
  }

  /** A quick pick whose broken definitions (`problems[]` of the list) are shown too, not silently dropped (issue 25). */
  private async pickWithProblems<T extends vscode.QuickPickItem>(items: T[], problems: string[] | undefined, options: vscode.QuickPickOptions): Promise<T> {
    type Row = T | (vscode.QuickPickItem & { problem: string });
    const rows: Row[] = [...items];
    const bad = (problems ?? []).filter((p) => typeof p === 'string' && p);
    if (bad.length) {
      rows.push({ label: 'Not loaded', kind: -1 } as Row);
      for (const p of bad) rows.push({ label: `$(warning) ${firstLine(p, 90)}`, detail: p, problem: p });
      for (const p of bad) this.nc.log.warn(`definition problem: ${p}`);
    }
    const pick = await api.showQuickPick(rows, options);
    if (!pick) throw new Dismissed();
    if ('problem' in pick) {
      throw new UserFacing(pick.problem);
    }
    return pick as T;
  }

  // ----- conversations -------------------------------------------------------------------------

  private async showBeside(uri: vscode.Uri): Promise<vscode.TextEditor> {
    const doc = await api.openTextDocument(uri);
    return api.showTextDocument(doc, { viewColumn: api.ViewColumn.Beside, preserveFocus: false, preview: false });
  }

  async openConversation(arg: unknown): Promise<ConversationOpenResult & Record<string, unknown>> {
    const ed = await this.target(arg);
    const result = await this.nc.request<ConversationOpenResult>(ServerCommands.conversationOpen, { uri: ed.document.uri.toString() });
    const editor = await this.conversations.show(api.Uri.file(result.path));
    return { ...result, languageId: editor.document.languageId, lineCount: editor.document.lineCount, visibleRanges: editor.visibleRanges.map((r) => [r.start.line, r.end.line]) };
  }

  async clearConversation(arg: unknown): Promise<ConversationClearResult> {
    const ed = await this.target(arg);
    const name = path.basename(ed.document.fileName);
    const choice = await api.showModalWarning(
      `Clear the nagent conversation of ${name}? The current conversation is archived, and the next request starts fresh.`,
      'Clear',
    );
    if (choice !== 'Clear') throw new Dismissed();
    const result = await this.nc.request<ConversationClearResult>(ServerCommands.conversationClear, { uri: ed.document.uri.toString() });
    const archived = result.archivedPath;
    this.notify(
      { level: 'info', message: archived ? `nagent: conversation of ${name} cleared (archived as ${path.basename(archived)}).` : `nagent: conversation of ${name} cleared.` },
      ...(archived ? [{ title: 'Open Archive', run: () => this.showBeside(api.Uri.file(archived)) }] : []),
    );
    return result;
  }

  // ----- history -------------------------------------------------------------------------------

  async showHistory(arg: unknown): Promise<HistoryResult> {
    const ed = await this.target(arg);
    const result = await this.nc.request<HistoryResult>(ServerCommands.history, { uri: ed.document.uri.toString() });
    const name = path.basename(ed.document.fileName);
    const md = result.markdown || `No git history for ${name}.`;
    await this.panels.show(`history:${ed.document.uri.toString()}`, `History — ${name}`, md, true);
    return result;
  }

  async showCoedits(arg: unknown): Promise<{ result: CoeditsResult; picked?: string }> {
    const ed = await this.target(arg);
    const result = await this.nc.request<CoeditsResult>(ServerCommands.coedits, { uri: ed.document.uri.toString() });
    if (!result.rows || result.rows.length === 0) {
      this.notify({ level: 'info', message: `nagent: no co-edited files for ${path.basename(ed.document.fileName)} (${result.commits ?? 0} commits).` });
      return { result };
    }
    const file = ed.document.uri.fsPath;
    const items = coeditItems(result.rows, result.commits, (p) => resolveRelatedPath(p, file, fs.existsSync));
    const pick = await api.showQuickPick<PickItem & vscode.QuickPickItem>(items, {
      title: `Files co-edited with ${path.basename(file)} (${result.commits} commits)`,
      placeHolder: 'Open a co-edited file',
      matchOnDescription: true,
    });
    if (!pick) return { result };
    await api.showTextDocument(api.Uri.file(pick.target), { preview: true });
    return { result, picked: pick.target };
  }

  // ----- split / patch / summarize -------------------------------------------------------------

  async split(arg: unknown): Promise<SplitResult> {
    const ed = await this.target(arg);
    const result = await this.nc.request<SplitResult>(ServerCommands.split, { uri: ed.document.uri.toString() });
    await this.rememberSplit(result.indexPath);
    const n = result.segments?.length ?? 0;
    const first = result.segments?.[0]?.path;
    this.notify(
      { level: 'info', message: `nagent: split ${path.basename(ed.document.fileName)} into ${n} segment${n === 1 ? '' : 's'} (${result.splitType}). Edit the segments, then run "nagent: Apply Patch".` },
      { title: 'Open Index', run: () => this.showBeside(api.Uri.file(result.indexPath)) },
      ...(first ? [{ title: 'Open First Segment', run: () => this.showBeside(api.Uri.file(first)) }] : []),
    );
    return result;
  }

  private async rememberSplit(indexPath: string): Promise<void> {
    const known = this.ctx.workspaceState.get<string[]>(SPLITS_KEY, []);
    await this.ctx.workspaceState.update(SPLITS_KEY, [indexPath, ...known.filter((k) => k !== indexPath)].slice(0, 50));
  }

  private async splitIndexes(): Promise<SplitIndexInfo[]> {
    const candidates = new Set<string>(this.ctx.workspaceState.get<string[]>(SPLITS_KEY, []));
    const roots = new Set<string>();
    if (this.nc.status?.stateRoot) roots.add(this.nc.status.stateRoot);
    for (const f of api.workspaceFolders() ?? []) roots.add(path.join(f.uri.fsPath, '.nagent'));
    for (const root of roots) {
      const splits = path.join(root, 'splits');
      let entries: string[] = [];
      try {
        entries = await fs.promises.readdir(splits);
      } catch {
        continue;
      }
      for (const e of entries) candidates.add(path.join(splits, e, 'index.json'));
    }
    const infos: SplitIndexInfo[] = [];
    for (const c of candidates) {
      try {
        const info = parseSplitIndex(c, JSON.parse(await fs.promises.readFile(c, 'utf8')));
        if (info) infos.push(info);
      } catch {
        /* gone or not an index */
      }
    }
    return infos;
  }

  async patch(): Promise<PatchResult> {
    if (!this.nc.status) await this.nc.refreshStatus();
    const infos = await this.splitIndexes();
    if (infos.length === 0) throw new UserFacing('no split index found: run "nagent: Split File" first');
    const active = api.activeEditor()?.document.uri.fsPath;
    const pick = await api.showQuickPick<PickItem & vscode.QuickPickItem>(splitIndexItems(infos, active), {
      title: 'nagent: Apply Patch — merge the edited segments back into the file',
      placeHolder: 'Pick a split index',
      matchOnDetail: true,
    });
    if (!pick) throw new Dismissed();
    const info = infos.find((i) => i.indexPath === pick.target);
    const source = info ? api.Uri.file(info.sourcePath) : undefined;
    const openDoc = source ? api.textDocuments().find((d) => d.uri.fsPath === source.fsPath) : undefined;
    let before: string | undefined = openDoc?.getText();
    if (before === undefined && source) before = await fs.promises.readFile(source.fsPath, 'utf8').catch(() => undefined);
    let result: PatchResult;
    try {
      result = await this.nc.request<PatchResult>(ServerCommands.patch, { indexPath: pick.target });
    } catch (e) {
      const msg = errorMessage(e);
      if (!isHashMismatch(msg)) throw e;
      const choice = await api.showModalWarning(`nagent: ${msg}`, 'Apply Anyway');
      if (choice !== 'Apply Anyway') throw new Dismissed();
      result = await this.nc.request<PatchResult>(ServerCommands.patch, { indexPath: pick.target, force: true });
    }
    const pp = result.patchPath;
    const target = result.uri ? api.Uri.parse(result.uri) : source;
    const actions: { title: string; run: () => unknown }[] = [];
    if (target && before !== undefined && result.changed) {
      const snap = this.views.put('before patch', target, before);
      actions.push({ title: 'Open Diff', run: () => this.openDiff(snap, target) });
    } else if (pp) {
      actions.push({ title: 'Open Diff', run: () => this.showBeside(api.Uri.file(pp)) });
    }
    this.notify(patchNotice(result), ...actions);
    return result;
  }

  /** The file's text before a change (left) against the file now (right), in the diff editor. */
  async openDiff(before: vscode.Uri, file: vscode.Uri): Promise<unknown> {
    const r = await api.commands.execute('vscode.diff', before, file, `${path.basename(file.fsPath)}: before ↔ after nagent`, { preview: true });
    this.report('diff', true, { left: before.toString(), right: file.toString() });
    return r;
  }

  async summarize(arg: unknown): Promise<SummarizeResult> {
    const ed = await this.target(arg);
    const result = await this.nc.request<SummarizeResult>(ServerCommands.summarize, { uri: ed.document.uri.toString() });
    const name = path.basename(ed.document.fileName);
    const md = `# Summary of ${name}\n\n${result.summary}\n\n---\n_mode: ${result.mode}${result.cached ? ', cached' : ''}_\n`;
    await this.panels.show(`summary:${ed.document.uri.toString()}`, `Summary — ${name}`, md, true);
    return result;
  }

  // ----- server --------------------------------------------------------------------------------

  async showStatus(): Promise<{ status?: StatusResult; launch?: string; serverCommands: string[] }> {
    await this.nc.ensure();
    const status = await this.nc.request<StatusResult>(ServerCommands.status, {});
    this.nc.status = status;
    this.nc.render();
    const launch = this.nc.launch ? describeLaunch(this.nc.launch) : undefined;
    this.nc.log.info(`status:\n${statusText(status, launch)}`);
    this.notify(
      { level: status.modelConfigured ? 'info' : 'warning', message: statusSummary(status) },
      { title: 'Show Log', run: () => this.nc.log.show() },
      ...(status.modelConfigured ? [] : [{ title: 'Open Settings', run: () => api.commands.execute('workbench.action.openSettings', 'nagent.') }]),
    );
    return { status, launch, serverCommands: this.nc.serverCommands() };
  }

  async restart(): Promise<{ launch?: string; serverCommands: string[] }> {
    await this.nc.restart();
    this.notify({ level: 'info', message: 'nagent: server restarted.' });
    return { launch: this.nc.launch ? describeLaunch(this.nc.launch) : undefined, serverCommands: this.nc.serverCommands() };
  }

  // ----- trust in a repository's definitions (DESIGN §12) -------------------------------------

  /** The active file (its repository is meant), else nothing: the server takes the first workspace folder. */
  private trustTarget(): Record<string, unknown> {
    const doc = api.activeEditor()?.document;
    return trustArgs(doc && doc.uri.scheme === 'file' ? doc.uri.toString() : undefined);
  }

  /** Show what the repository defines and what trusting allows; trust it when the user says so. */
  async trustRepository(): Promise<{ status: TrustResult; result?: TrustResult }> {
    await this.nc.ensure();
    const args = this.trustTarget();
    const status = await this.nc.request<TrustResult>(ServerCommands.trustStatus, args);
    if (nothingToTrust(status)) {
      this.notify({ level: 'info', message: trustOutcome(status) });
      return { status };
    }
    if (alreadyTrusted(status)) {
      this.notify({ level: 'info', message: trustOutcome(status) }, { title: 'Revoke', run: () => api.commands.execute(Commands.revokeRepositoryTrust) });
      return { status };
    }
    const { message, detail } = trustPrompt(status);
    // the report lets the e2e test see what the modal was asked to show before it answers it
    this.report('trustPrompt', true, { message, detail, status });
    const choice = await api.showModalWarningDetail(message, detail, 'Trust');
    if (choice !== 'Trust') throw new Dismissed();
    // the hash the user saw: the server refuses when the files changed while the modal was open
    const result = await this.nc.request<TrustResult>(ServerCommands.trust, { ...args, hash: status.hash });
    this.notify({ level: result.trusted ? 'info' : 'warning', message: trustOutcome(result) });
    return { status, result };
  }

  async revokeRepositoryTrust(): Promise<TrustResult> {
    await this.nc.ensure();
    const result = await this.nc.request<TrustResult>(ServerCommands.trustRevoke, this.trustTarget());
    this.notify({ level: 'info', message: trustOutcome(result) });
    return result;
  }

  // ----- server commands run by VS Code itself (code actions) ---------------------------------

  /** Middleware for `workspace/executeCommand` of server commands invoked outside our commands. */
  async executeServerCommand(command: string, args: unknown[], next: (command: string, args: unknown[]) => Promise<unknown>): Promise<unknown> {
    return this.run(`server:${command}`, async () => {
      const arg = (args.length === 1 && args[0] && typeof args[0] === 'object' ? args[0] : {}) as Record<string, unknown>;
      if (command === ServerCommands.edit && (typeof arg.request !== 'string' || arg.request.trim() === '')) {
        // "nagent: edit selection" code action: the client completes the request text.
        const uri = typeof arg.uri === 'string' ? api.Uri.parse(arg.uri) : api.activeEditor()?.document.uri;
        if (!uri) throw new UserFacing('no document to edit');
        const doc = await api.openTextDocument(uri);
        const request = await this.askRequest('nagent: Edit', arg.range ? 'the selection' : path.basename(doc.fileName));
        return this.runEdit(doc, request, undefined, { ...arg });
      }
      const doc = typeof arg.uri === 'string' ? api.Uri.parse(arg.uri) : undefined;
      const long = command === ServerCommands.edit || command === 'nagent.instruction.apply' || command === ServerCommands.recipeRun;
      const result = long
        ? await this.nc.working(command, () => this.conversations.withSync(async () => next(command, args)))
        : await next(command, args);
      await this.presentGeneric(command, result, doc);
      return result;
    });
  }

  private async presentGeneric(command: string, result: unknown, doc?: vscode.Uri): Promise<void> {
    if (!result || typeof result !== 'object') return;
    const r = result as Record<string, unknown>;
    if (command === ServerCommands.edit || command === 'nagent.instruction.apply' || command === ServerCommands.recipeRun) {
      return this.presentEdit(result as EditResult, doc, typeof r.request === 'string' ? r.request : undefined);
    }
    if (command.startsWith('nagent.review.')) {
      await this.conversations.refresh();
      return;
    }
    if (command === ServerCommands.history && typeof r.markdown === 'string') {
      const name = doc ? path.basename(doc.fsPath) : typeof r.file === 'string' ? r.file : 'file';
      await this.panels.show(`history:${doc?.toString() ?? name}`, `History — ${name}`, r.markdown, true);
      return;
    }
    if (command === ServerCommands.patch) return this.notify(patchNotice(result as PatchResult));
    if (command === ServerCommands.split && typeof r.indexPath === 'string') {
      void this.rememberSplit(r.indexPath);
      const n = Array.isArray(r.segments) ? r.segments.length : 0;
      return this.notify({ level: 'info', message: `nagent: split into ${n} segment${n === 1 ? '' : 's'}.` });
    }
  }
}

/** Show a document, reusing an editor that already shows it (in whichever group). */
async function reveal(uri: vscode.Uri): Promise<vscode.TextEditor> {
  const shown = api.visibleEditors().find((e) => e.document.uri.toString() === uri.toString());
  const doc = shown?.document ?? (await api.openTextDocument(uri));
  return api.showTextDocument(doc, { viewColumn: shown?.viewColumn, preserveFocus: false });
}

export function toLspRange(r: vscode.Range): LspRange {
  return { start: { line: r.start.line, character: r.start.character }, end: { line: r.end.line, character: r.end.character } };
}

function docName(d: vscode.TextDocument): string {
  return d.uri.scheme === 'file' || d.uri.scheme === CONVERSATION_SCHEME ? d.uri.fsPath : d.uri.toString();
}

const MAX_REPORT_TEXT = 1_000_000;

function snapshot(d: vscode.TextDocument): DocumentSnapshot {
  const text = d.getText();
  return {
    uri: d.uri.toString(),
    fsPath: d.uri.scheme === 'file' || d.uri.scheme === CONVERSATION_SCHEME ? d.uri.fsPath : undefined,
    languageId: d.languageId,
    version: d.version,
    isDirty: d.isDirty,
    text: text.length > MAX_REPORT_TEXT ? text.slice(0, MAX_REPORT_TEXT) : text,
  };
}

