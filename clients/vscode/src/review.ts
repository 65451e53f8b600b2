/**
 * Review of a proposal (DESIGN §9) in the diff editor: the current file on the left, the proposed
 * text (a virtual `nagent-proposal:` document) on the right, an Accept / Reject lens on every hunk
 * and Accept All / Reject All. Decisions are collected here; when every hunk of the proposal has
 * one, `nagent.review.apply` applies the accepted hunks and rejects the rest in one call.
 */
import * as fs from 'fs';
import * as path from 'path';
import type * as vscode from 'vscode';
import { Commands } from './pure/ids';
import { Proposal, ProposalFile, ReviewApplyResult, ReviewDiscardResult, ReviewListResult, ServerCommands } from './pure/protocol';
import { acceptedIds, Decision, nextUndecidedFile, proposedView, reviewOutcome, undecided } from './pure/review';
import { formatDate } from './pure/format';
import * as api from './vscodeapi';

export const PROPOSAL_SCHEME = 'nagent-proposal';
export const REVIEW_CONTEXT_KEY = 'nagent.reviewPending';

export interface ReviewHost {
  request<T>(command: string, arg: Record<string, unknown>): Promise<T>;
  /** Called before and after the server changes files and conversations. */
  withConversationSync<T>(fn: () => Promise<T>): Promise<T>;
  /** `key`: the proposal id, so that the run's entry is updated instead of added again. */
  showAnswer(kind: string, file: string, request: string | undefined, response: string, outcome?: string, key?: string, warnings?: string[]): Promise<void>;
  /** Show the Answers panel again (beside the diff), without adding an answer. */
  revealAnswers(): Promise<void>;
  notify(level: 'info' | 'warning', message: string): void;
  report(event: string, ok: boolean, result?: unknown, extra?: Record<string, unknown>): void;
  /** The proposal was decided here: the inline review reads it again (drops it when nothing is pending). */
  decided?(id: string): Promise<unknown>;
  log: vscode.LogOutputChannel;
}

interface ReviewState {
  proposal: Proposal;
  decisions: Map<string, Decision>;
  response?: string;
  current: number;
  submitting: boolean;
}

export class ReviewController implements vscode.TextDocumentContentProvider, vscode.CodeLensProvider, vscode.Disposable {
  private readonly reviews = new Map<string, ReviewState>();
  private readonly contentEmitter = new api.EventEmitter<vscode.Uri>();
  private readonly lensEmitter = new api.EventEmitter<void>();
  readonly onDidChange = this.contentEmitter.event;
  readonly onDidChangeCodeLenses = this.lensEmitter.event;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly host: ReviewHost) {
    this.disposables.push(
      api.registerTextDocumentContentProvider(PROPOSAL_SCHEME, this),
      api.registerCodeLensProvider({ scheme: PROPOSAL_SCHEME }, this),
      api.onDidChangeTextDocument((e) => {
        if (e.document.uri.scheme !== 'file') return;
        for (const [id, st] of this.reviews) {
          const f = st.proposal.files.find((x) => sameFile(x, e.document.uri));
          if (f) this.contentEmitter.fire(proposalUri(id, f));
        }
      }),
    );
  }

  /** Forget a proposal decided elsewhere (inline, hunk by hunk): close its diff, drop the local decisions. */
  async forget(id: string): Promise<void> {
    if (!this.reviews.delete(id)) return;
    await this.closeEditors(id);
    await this.updateContext();
  }

  /** The hunk of a proposal diff (right side) at a line: the one that holds it, else the next one. */
  async hunkAt(uri: vscode.Uri, line: number): Promise<{ id: string; hunkId: string } | undefined> {
    if (uri.scheme !== PROPOSAL_SCHEME) return undefined;
    const { id, file } = parseProposalUri(uri);
    const f = this.reviews.get(id)?.proposal.files.find((x) => x.uri === file);
    const st = this.reviews.get(id);
    if (!f || !st) return undefined;
    const view = proposedView(await currentText(f), f.hunks, st.decisions);
    const placed = view.hunks.filter((h) => !h.missing).sort((a, b) => a.startLine - b.startLine);
    const hit = placed.find((h) => h.startLine <= line && line <= h.endLine) ?? placed.find((h) => h.startLine >= line) ?? placed[placed.length - 1];
    return hit ? { id, hunkId: hit.id } : undefined;
  }

  pending(): string[] {
    return [...this.reviews.keys()];
  }

  state(id: string): { proposal: Proposal; decisions: Record<string, Decision> } | undefined {
    const st = this.reviews.get(id);
    return st ? { proposal: st.proposal, decisions: Object.fromEntries(st.decisions) } : undefined;
  }

  // ----- documents -----------------------------------------------------------------------------

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const { id, file } = parseProposalUri(uri);
    const st = this.reviews.get(id);
    const f = st?.proposal.files.find((x) => x.uri === file);
    if (!st || !f) return '';
    if (new URLSearchParams(uri.query).get('side') === 'base') return currentText(f);
    return proposedView(await currentText(f), f.hunks, st.decisions).text;
  }

  async provideCodeLenses(doc: vscode.TextDocument): Promise<vscode.CodeLens[]> {
    const { id, file } = parseProposalUri(doc.uri);
    if (new URLSearchParams(doc.uri.query).get('side') === 'base') return [];
    const st = this.reviews.get(id);
    const index = st ? st.proposal.files.findIndex((x) => x.uri === file) : -1;
    if (!st || index < 0) return [];
    const f = st.proposal.files[index];
    const view = proposedView(await currentText(f), f.hunks, st.decisions);
    const lenses: vscode.CodeLens[] = [];
    for (const h of view.hunks) {
      const range = new api.Range(h.startLine, 0, h.startLine, 0);
      if (h.missing) {
        lenses.push(new api.CodeLens(range, { title: `$(warning) change ${h.id} no longer matches the file`, command: '' }));
      }
      for (const w of f.hunks.find((x) => x.id === h.id)?.warnings ?? []) {
        lenses.push(new api.CodeLens(range, { title: `$(warning) ${w}`, tooltip: w, command: '' }));
      }
      if (!h.decision) {
        lenses.push(
          new api.CodeLens(range, { title: '$(check) Accept', tooltip: `Accept change ${h.id}`, command: Commands.acceptHunk, arguments: [id, h.id] }),
          new api.CodeLens(range, { title: '$(x) Reject', tooltip: `Reject change ${h.id}`, command: Commands.rejectHunk, arguments: [id, h.id] }),
        );
      } else {
        lenses.push(
          new api.CodeLens(range, {
            title: h.decision === 'accept' ? '$(pass-filled) Accepted — undo' : '$(circle-slash) Rejected — undo',
            command: Commands.acceptHunk,
            arguments: [id, h.id, 'undo'],
          }),
        );
      }
    }
    // after the hunks' own lenses, so that a change on the first line keeps its Accept/Reject in view
    const top = new api.Range(0, 0, 0, 0);
    const left = undecided(st.proposal, st.decisions).length;
    const total = st.proposal.files.reduce((n, x) => n + x.hunks.length, 0);
    lenses.push(
      new api.CodeLens(top, { title: '$(check-all) Accept All', command: Commands.acceptAll, arguments: [id] }),
      new api.CodeLens(top, { title: '$(close-all) Reject All', command: Commands.rejectAll, arguments: [id] }),
      new api.CodeLens(top, {
        title: `file ${index + 1}/${st.proposal.files.length} · ${total - left}/${total} decided`,
        command: '',
      }),
    );
    if (st.proposal.files.length > 1) {
      lenses.push(new api.CodeLens(top, { title: 'Next File $(arrow-right)', command: Commands.reviewProposals, arguments: [id, (index + 1) % st.proposal.files.length] }));
    }
    return lenses;
  }

  // ----- opening ---------------------------------------------------------------------------------

  /** Load a proposal from the server and show its first undecided file in the diff editor. */
  async open(id: string, response?: string, fileIndex?: number): Promise<Proposal> {
    let st = this.reviews.get(id);
    const reopened = st !== undefined;
    if (!st) {
      const proposal = await this.host.request<Proposal>(ServerCommands.reviewShow, { id });
      st = { proposal, decisions: new Map(), response: response ?? proposal.response, current: 0, submitting: false };
      this.reviews.set(id, st);
      await this.updateContext();
      if (st.response) {
        const first = proposal.files[0];
        await this.host.showAnswer('Proposal', first ? first.path || first.uri : '', proposal.request, st.response, 'awaiting review', id, proposalWarnings(proposal));
      }
    }
    const index = fileIndex ?? Math.max(0, nextUndecidedFile(st.proposal, st.decisions));
    await this.showFile(st, index);
    if (reopened && fileIndex === undefined) await this.host.revealAnswers();
    this.host.report('review:opened', true, { id, files: st.proposal.files.map((f) => ({ uri: f.uri, hunks: f.hunks.map((h) => h.id) })) });
    return st.proposal;
  }

  private async showFile(st: ReviewState, index: number): Promise<void> {
    const f = st.proposal.files[index];
    if (!f) return;
    st.current = index;
    const right = proposalUri(st.proposal.id, f);
    const exists = !f.created && fs.existsSync(api.Uri.parse(f.uri).fsPath);
    const left = exists ? api.Uri.parse(f.uri) : right.with({ query: `${right.query}&side=base` });
    const name = path.basename(f.path || api.Uri.parse(f.uri).fsPath);
    const n = st.proposal.files.length;
    const title = `${name} ↔ nagent proposal${n > 1 ? ` (${index + 1}/${n})` : ''}`;
    await api.commands.execute('vscode.diff', left, right, title, { preview: false, viewColumn: api.ViewColumn.One });
    this.lensEmitter.fire();
  }

  // ----- deciding --------------------------------------------------------------------------------

  /** Accept/reject one hunk (`undo` forgets the decision). Submits when every hunk is decided. */
  async decide(id: string, hunkId: string, decision: Decision | 'undo'): Promise<unknown> {
    const st = this.reviews.get(id);
    if (!st) throw new Error(`no pending review ${id}`);
    if (decision === 'undo') st.decisions.delete(hunkId);
    else st.decisions.set(hunkId, decision);
    for (const f of st.proposal.files) if (f.hunks.some((h) => h.id === hunkId)) this.contentEmitter.fire(proposalUri(id, f));
    this.lensEmitter.fire();
    if (undecided(st.proposal, st.decisions).length === 0) return this.submit(id);
    const cur = st.proposal.files[st.current];
    if (cur && cur.hunks.every((h) => st.decisions.has(h.id))) {
      const next = nextUndecidedFile(st.proposal, st.decisions, st.current);
      if (next >= 0) await this.showFile(st, next);
    }
    return { id, decisions: Object.fromEntries(st.decisions) };
  }

  /** Accept or reject every undecided hunk, then submit. */
  async decideAll(id: string | undefined, decision: Decision): Promise<unknown> {
    const target = id ?? (await this.pick());
    if (!target) return undefined;
    if (!this.reviews.has(target)) await this.open(target);
    const st = this.reviews.get(target);
    if (!st) return undefined;
    for (const h of st.proposal.files.flatMap((f) => f.hunks)) if (!st.decisions.has(h.id)) st.decisions.set(h.id, decision);
    return this.submit(target);
  }

  private async submit(id: string): Promise<ReviewApplyResult | ReviewDiscardResult | undefined> {
    const st = this.reviews.get(id);
    if (!st || st.submitting) return undefined;
    st.submitting = true;
    const accept = acceptedIds(st.proposal, st.decisions);
    try {
      const result = await this.host.withConversationSync(async () =>
        accept.length === 0
          ? this.host.request<ReviewDiscardResult>(ServerCommands.reviewDiscard, { id })
          : this.host.request<ReviewApplyResult>(ServerCommands.reviewApply, { id, accept }),
      );
      this.reviews.delete(id);
      await this.closeEditors(id);
      await this.updateContext();
      await this.host.decided?.(id);
      const rejected = result.rejected?.length ?? 0;
      const conflicts = (result as Partial<ReviewApplyResult>).conflicts?.length ?? 0;
      const outcome = reviewOutcome(accept.length - conflicts, rejected, conflicts);
      this.host.notify(conflicts ? 'warning' : 'info', `nagent review: ${outcome}.`);
      const first = st.proposal.files[0];
      await this.host.showAnswer('Review', first ? first.path || first.uri : '', st.proposal.request, st.response ?? '', outcome, id);
      const buffers: Record<string, string> = {};
      for (const f of st.proposal.files) {
        const d = api.textDocuments().find((x) => x.uri.scheme === 'file' && x.uri.fsPath === api.Uri.parse(f.uri).fsPath);
        if (d) buffers[d.uri.fsPath] = d.getText();
      }
      this.host.report('review:applied', true, { id, accept, result, buffers });
      return result;
    } catch (e) {
      st.submitting = false;
      this.host.report('review:applied', false, { id, accept, error: String((e as Error)?.message ?? e) });
      throw e;
    }
  }

  private async closeEditors(id: string): Promise<void> {
    const tabs: vscode.Tab[] = [];
    for (const g of api.tabGroups().all) {
      for (const t of g.tabs) {
        const input = t.input;
        if (input instanceof api.TabInputTextDiff && input.modified.scheme === PROPOSAL_SCHEME && parseProposalUri(input.modified).id === id) tabs.push(t);
        else if (input instanceof api.TabInputText && input.uri.scheme === PROPOSAL_SCHEME && parseProposalUri(input.uri).id === id) tabs.push(t);
      }
    }
    if (tabs.length) await api.tabGroups().close(tabs, true);
  }

  private async updateContext(): Promise<void> {
    await api.commands.setContext(REVIEW_CONTEXT_KEY, this.reviews.size > 0);
  }

  /**
   * The proposal the user means: with `fromList` a pick from the server's pending proposals
   * (nagent.review.list); else the active diff's, the only one loaded, or that pick.
   */
  async pick(fromList = false): Promise<string | undefined> {
    if (!fromList) {
      const active = api.activeEditor()?.document.uri;
      if (active?.scheme === PROPOSAL_SCHEME) return parseProposalUri(active).id;
      if (this.reviews.size === 1) return [...this.reviews.keys()][0];
    }
    const list = await this.host.request<ReviewListResult>(ServerCommands.reviewList, {});
    const proposals = list.proposals ?? [];
    if (proposals.length === 0) {
      this.host.notify('info', 'nagent: no proposed changes are waiting for review.');
      return undefined;
    }
    if (proposals.length === 1) return proposals[0].id;
    const items = proposals.map((p) => {
      const files = p.files ?? [];
      const hunks = files.reduce((n, f) => n + (typeof f.hunks === 'number' ? f.hunks : Array.isArray(f.hunks) ? f.hunks.length : 0), 0);
      return {
        label: p.request || p.id,
        description: `${files.map((f) => path.basename(api.Uri.parse(f.uri).fsPath)).join(', ')} · ${hunks} change${hunks === 1 ? '' : 's'}`,
        detail: p.createdAt ? `proposed ${formatDate(p.createdAt)}` : undefined,
        id: p.id,
      };
    });
    const choice = await api.showQuickPick(items, { title: 'nagent: Review Proposed Changes', placeHolder: 'Pick a proposal to review', matchOnDescription: true });
    return choice?.id;
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    this.contentEmitter.dispose();
    this.lensEmitter.dispose();
  }
}

export function proposalUri(id: string, f: ProposalFile): vscode.Uri {
  const file = api.Uri.parse(f.uri);
  return api.Uri.from({ scheme: PROPOSAL_SCHEME, path: file.path, query: new URLSearchParams({ id, file: f.uri }).toString() });
}

export function parseProposalUri(uri: vscode.Uri): { id: string; file: string } {
  const q = new URLSearchParams(uri.query);
  return { id: q.get('id') ?? '', file: q.get('file') ?? '' };
}

function sameFile(f: ProposalFile, uri: vscode.Uri): boolean {
  return api.Uri.parse(f.uri).fsPath === uri.fsPath;
}

/** The file's text now: its open buffer (unsaved edits count), else the disk, else empty (a new file). */
async function currentText(f: ProposalFile): Promise<string> {
  const uri = api.Uri.parse(f.uri);
  const open = api.textDocuments().find((d) => d.uri.scheme === 'file' && d.uri.fsPath === uri.fsPath);
  if (open) return open.getText();
  try {
    return await fs.promises.readFile(uri.fsPath, 'utf8');
  } catch {
    return '';
  }
}

/** The sentences a proposal carries besides its hunks: coupled files not touched (issue 26). */
export function proposalWarnings(p: Proposal): string[] {
  return (p.coupling ?? []).map((c) => c.message).filter((m): m is string => typeof m === 'string' && m !== '');
}
