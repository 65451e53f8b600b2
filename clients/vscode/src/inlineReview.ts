/**
 * Review in the source editor (issue 25): every pending hunk of the loaded proposals is drawn where it
 * applies — its old lines on the removed-line background, its new text as ghost text after them, the
 * whole new text in the hover — with an Accept / Reject lens on the hunk, and Ctrl+Alt+N Enter /
 * Ctrl+Alt+N Backspace for the hunk at the cursor. A decision is sent at once for that one hunk
 * (`nagent.review.apply {accept: [id], rest: "keep"}` / `nagent.review.discard {hunks: [id]}`), the
 * others stay pending; the proposal is then read again from the server.
 */
import type * as vscode from 'vscode';
import { Commands } from './pure/ids';
import { decideArgs, hunkAtLine, InlineHunk, inlineSummary, placeHunks } from './pure/inlineReview';
import { Proposal, ReviewListResult, ServerCommands } from './pure/protocol';
import * as api from './vscodeapi';

export const INLINE_CONTEXT_KEY = 'nagent.inlineReviewPending';

export interface InlineReviewHost {
  request<T>(command: string, arg: Record<string, unknown>): Promise<T>;
  withConversationSync<T>(fn: () => Promise<T>): Promise<T>;
  /** A proposal was decided hunk by hunk here: the diff review must drop its copy. */
  forgetDiff(id: string): Promise<void>;
  notify(level: 'info' | 'warning', message: string): void;
  report(event: string, ok: boolean, result?: unknown): void;
  log: vscode.LogOutputChannel;
}

export class InlineReview implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly proposals = new Map<string, Proposal>();
  private readonly lensEmitter = new api.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensEmitter.event;
  private readonly removed: vscode.TextEditorDecorationType;
  private readonly added: vscode.TextEditorDecorationType;
  private readonly disposables: vscode.Disposable[] = [];
  private redrawTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly host: InlineReviewHost) {
    this.removed = api.createTextEditorDecorationType({
      isWholeLine: true,
      backgroundColor: new api.ThemeColor('diffEditor.removedLineBackground'),
      overviewRulerColor: new api.ThemeColor('editorOverviewRuler.deletedForeground'),
      overviewRulerLane: api.OverviewRulerLane.Left,
    });
    this.added = api.createTextEditorDecorationType({
      // the proposed text after the lines it replaces: ghost-text colour on the inserted-line background
      after: { color: new api.ThemeColor('editorGhostText.foreground'), backgroundColor: new api.ThemeColor('diffEditor.insertedLineBackground'), margin: '0 0 0 2em', fontStyle: 'italic' },
      overviewRulerColor: new api.ThemeColor('editorOverviewRuler.addedForeground'),
      overviewRulerLane: api.OverviewRulerLane.Left,
    });
    this.disposables.push(
      this.removed,
      this.added,
      api.registerCodeLensProvider({ scheme: 'file' }, this),
      api.onDidChangeVisibleTextEditors(() => this.redraw()),
      api.onDidChangeTextDocument((e) => {
        if (e.document.uri.scheme === 'file' && this.filesOf(e.document.uri).length) this.scheduleRedraw();
      }),
    );
  }

  /** Proposal ids shown inline. */
  pending(): string[] {
    return [...this.proposals.keys()];
  }

  /** Read a proposal from the server and draw its hunks (drops it when nothing is pending). */
  async load(id: string): Promise<Proposal | undefined> {
    let p: Proposal | undefined;
    try {
      p = await this.host.request<Proposal>(ServerCommands.reviewShow, { id });
    } catch (e) {
      this.host.log.info(`inline review: proposal ${id} is gone (${String((e as Error)?.message ?? e)})`);
    }
    if (p && p.files.some((f) => f.hunks.length > 0)) this.proposals.set(id, p);
    else this.proposals.delete(id);
    await this.changed();
    return p;
  }

  /** Every pending proposal of the workspace (nagent.review.list), drawn inline. */
  async loadAll(): Promise<void> {
    const list = await this.host.request<ReviewListResult>(ServerCommands.reviewList, {});
    for (const p of list.proposals ?? []) await this.load(p.id);
  }

  forget(id: string): void {
    if (this.proposals.delete(id)) void this.changed();
  }

  private async changed(): Promise<void> {
    await api.commands.setContext(INLINE_CONTEXT_KEY, this.proposals.size > 0);
    this.redraw();
  }

  private filesOf(uri: vscode.Uri): { id: string; hunks: Proposal['files'][number]['hunks'] }[] {
    const out: { id: string; hunks: Proposal['files'][number]['hunks'] }[] = [];
    for (const [id, p] of this.proposals) {
      for (const f of p.files) if (api.Uri.parse(f.uri).fsPath === uri.fsPath) out.push({ id, hunks: f.hunks });
    }
    return out;
  }

  /** The pending hunks of a document, placed in its current text. */
  placed(doc: vscode.TextDocument): InlineHunk[] {
    const files = this.filesOf(doc.uri);
    return files.length ? placeHunks(doc.getText(), files) : [];
  }

  private scheduleRedraw(): void {
    clearTimeout(this.redrawTimer);
    this.redrawTimer = setTimeout(() => this.redraw(), 100);
  }

  redraw(): void {
    for (const ed of api.visibleEditors()) {
      if (ed.document.uri.scheme !== 'file') continue;
      const placed = this.placed(ed.document);
      const removed: vscode.DecorationOptions[] = [];
      const added: vscode.DecorationOptions[] = [];
      for (const h of placed) {
        const hover = new api.MarkdownString();
        hover.appendMarkdown(`**nagent proposes** (change ${h.hunk.id}; Ctrl+Alt+N Enter accepts, Ctrl+Alt+N Backspace rejects):\n\n`);
        hover.appendCodeblock(h.hunk.newText || '(the lines are removed)', ed.document.languageId);
        for (const w of h.hunk.warnings ?? []) hover.appendMarkdown(`\n\n⚠ ${w}`);
        if (!h.insertion) removed.push({ range: new api.Range(h.startLine, 0, h.endLine, 0), hoverMessage: hover });
        const anchor = h.insertion ? Math.max(0, h.startLine - 1) : h.endLine;
        const end = ed.document.lineAt(Math.min(anchor, ed.document.lineCount - 1)).range.end;
        added.push({ range: new api.Range(end, end), hoverMessage: hover, renderOptions: { after: { contentText: `  ${inlineSummary(h.hunk)}` } } });
      }
      ed.setDecorations(this.removed, removed);
      ed.setDecorations(this.added, added);
    }
    this.lensEmitter.fire();
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    const lenses: vscode.CodeLens[] = [];
    const placed = this.placed(doc);
    for (const h of placed) {
      const range = new api.Range(h.startLine, 0, h.startLine, 0);
      const args = [h.proposalId, h.hunk.id];
      lenses.push(
        new api.CodeLens(range, { title: '$(check) Accept change', tooltip: 'Accept this change (Ctrl+Alt+N Enter)', command: Commands.acceptHunkAtCursor, arguments: args }),
        new api.CodeLens(range, { title: '$(x) Reject change', tooltip: 'Reject this change (Ctrl+Alt+N Backspace)', command: Commands.rejectHunkAtCursor, arguments: args }),
      );
      for (const w of h.hunk.warnings ?? []) lenses.push(new api.CodeLens(range, { title: `$(warning) ${w}`, tooltip: w, command: '' }));
    }
    if (placed.length) {
      const files = new Set([...this.proposals.values()].flatMap((p) => p.files.filter((f) => f.hunks.length).map((f) => f.uri))).size;
      lenses.push(new api.CodeLens(new api.Range(placed[0].startLine, 0, placed[0].startLine, 0), { title: `$(files) ${files} changed file${files === 1 ? '' : 's'}`, tooltip: 'List every changed file (Ctrl+Alt+N L)', command: Commands.listChangedFiles }));
    }
    return lenses;
  }

  /** The hunk at the cursor of a file editor. */
  hunkAtCursor(ed: vscode.TextEditor): InlineHunk | undefined {
    return hunkAtLine(this.placed(ed.document), ed.selection.active.line);
  }

  /** Accept or reject one hunk now; the proposal's other hunks stay pending. */
  async decide(proposalId: string, hunkId: string, decision: 'accept' | 'reject'): Promise<unknown> {
    const { command, arg } = decideArgs(proposalId, hunkId, decision);
    const result = await this.host.withConversationSync(() => this.host.request<Record<string, unknown>>(command, arg));
    await this.host.forgetDiff(proposalId);
    const conflicts = Array.isArray(result?.conflicts) ? result.conflicts.length : 0;
    if (conflicts) this.host.notify('warning', `nagent: change ${hunkId} could not be applied: ${String(result.reason ?? 'the file changed')}`);
    await this.load(proposalId);
    const left = this.proposals.get(proposalId)?.files.reduce((n, f) => n + f.hunks.length, 0) ?? 0;
    this.host.report('review:inline', true, { id: proposalId, hunk: hunkId, decision, result, left });
    return { id: proposalId, hunk: hunkId, decision, result, left };
  }

  /** Every changed file of the loaded proposals, to open one at its first change. */
  files(): { uri: string; path: string; hunks: number; proposalId: string; line: number }[] {
    const out: { uri: string; path: string; hunks: number; proposalId: string; line: number }[] = [];
    for (const [id, p] of this.proposals) {
      for (const f of p.files) if (f.hunks.length) out.push({ uri: f.uri, path: f.path, hunks: f.hunks.length, proposalId: id, line: f.hunks[0].range.start.line });
    }
    return out;
  }

  dispose(): void {
    clearTimeout(this.redrawTimer);
    for (const d of this.disposables) d.dispose();
    this.lensEmitter.dispose();
  }
}
