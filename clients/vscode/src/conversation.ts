/**
 * The conversation as a first-class document (DESIGN §2): language `nagent-conversation` with
 * folding, opened at its end with `<initial_context>` folded, and kept in sync with the server's
 * appends. The server reads the open buffer; before a run the client saves a conversation the user
 * edited (the server would write that same text anyway) so that the server's append does not
 * conflict with a dirty buffer, and after the run it makes sure the editor shows the appended text.
 */
import * as fs from 'fs';
import type * as vscode from 'vscode';
import { conversationFolds, draftHint, INITIAL_CONTEXT, isConversationPath, LANGUAGE_ID, shouldFollowEnd } from './pure/conversation';
import { Commands } from './pure/ids';
import { ConversationFileSystem, CONVERSATION_SCHEME, conversationEditorUri } from './conversationFs';
import * as api from './vscodeapi';

export function isConversationDocument(doc: vscode.TextDocument): boolean {
  return doc.uri.scheme === CONVERSATION_SCHEME || doc.languageId === LANGUAGE_ID || (doc.uri.scheme === 'file' && isConversationPath(doc.uri.fsPath));
}

/** A conversation document backed by a file on disk (its own scheme, or a plain file). */
function onDisk(doc: vscode.TextDocument): boolean {
  return doc.uri.scheme === CONVERSATION_SCHEME || doc.uri.scheme === 'file';
}

export class ConversationSupport implements vscode.FoldingRangeProvider, vscode.CodeLensProvider, vscode.Disposable {
  private readonly prepared = new Set<string>();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly reloads = new Map<string, ReturnType<typeof setTimeout>>();
  /** Runs in flight (withSync): the server may append to a conversation meanwhile. */
  private running = 0;

  private readonly fsp = new ConversationFileSystem();

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.disposables.push(
      this.fsp,
      api.registerFileSystemProvider(CONVERSATION_SCHEME, this.fsp, { isCaseSensitive: true }),
      api.registerFoldingRangeProvider({ language: LANGUAGE_ID }, this),
      api.registerCodeLensProvider({ language: LANGUAGE_ID }, this),
      api.onDidOpenTextDocument((d) => void this.ensureLanguage(d)),
      api.onDidChangeActiveTextEditor((e) => {
        if (e && e.document.uri.scheme === 'file' && isConversationPath(e.document.uri.fsPath) && !e.document.isDirty) {
          // opened as a plain file (Explorer, Quick Open): show it under its own scheme instead (conversationFs.ts)
          void this.reopen(e);
          return;
        }
        if (e && isConversationDocument(e.document) && !this.prepared.has(e.document.uri.toString())) void this.prepare(e);
      }),
      api.onDidCloseTextDocument((d) => this.prepared.delete(d.uri.toString())),
      // the server appended (the buffer was reloaded from disk): follow the end, fold the context again — only
      // while one of our runs is in flight, and only when the buffer now holds what is on disk. Anything else is
      // the user typing (VS Code reports even the first keystroke with isDirty false), and moving the selection
      // then puts the next characters somewhere else (issue 25 #3).
      api.onDidChangeTextDocument((e) => {
        if (!isConversationDocument(e.document) || e.contentChanges.length === 0) return;
        if (!shouldFollowEnd({ dirty: e.document.isDirty, running: this.running > 0, matchesDisk: true })) return;
        const key = e.document.uri.toString();
        clearTimeout(this.reloads.get(key));
        this.reloads.set(
          key,
          setTimeout(() => {
            this.reloads.delete(key);
            void this.followIfReloaded(e.document);
          }, 150),
        );
      }),
    );
    for (const d of api.textDocuments()) void this.ensureLanguage(d);
  }

  /** A change during a run: go to the end only if the buffer is the file on disk (a reload, not typing). */
  private async followIfReloaded(doc: vscode.TextDocument): Promise<void> {
    let disk: string | undefined;
    try {
      disk = await fs.promises.readFile(doc.uri.fsPath, 'utf8');
    } catch {
      return;
    }
    if (!shouldFollowEnd({ dirty: doc.isDirty, running: this.running > 0, matchesDisk: disk === doc.getText() })) return;
    for (const ed of api.visibleEditors()) if (ed.document === doc) await this.prepare(ed);
  }

  provideFoldingRanges(doc: vscode.TextDocument): vscode.FoldingRange[] {
    return conversationFolds(doc.getText()).map((f) => new api.FoldingRange(f.start, f.end, f.tag === INITIAL_CONTEXT ? api.FoldingRangeKind.Region : undefined));
  }

  /** The chat hint at the end of the conversation: how to send (it sends when clicked). */
  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    const hint = draftHint(doc.getText());
    const range = new api.Range(hint.line, 0, hint.line, 0);
    return [
      new api.CodeLens(range, { title: hint.title, command: Commands.sendFromConversation, arguments: [doc.uri] }),
      new api.CodeLens(range, { title: '$(mention) Mention a file', tooltip: 'Insert @path: the request includes that file (Ctrl+Alt+N 2)', command: Commands.insertMention }),
    ];
  }

  /** A conversation under a custom state root is not matched by the language's file patterns. */
  private async ensureLanguage(doc: vscode.TextDocument): Promise<vscode.TextDocument> {
    if (!onDisk(doc) || doc.languageId === LANGUAGE_ID || (doc.uri.scheme === 'file' && !isConversationPath(doc.uri.fsPath))) return doc;
    try {
      return await api.setTextDocumentLanguage(doc, LANGUAGE_ID);
    } catch (e) {
      this.log.warn(`conversation language for ${doc.uri.fsPath}: ${String(e)}`);
      return doc;
    }
  }

  /** Open a conversation beside the editor, `<initial_context>` folded, the cursor at its end. */
  async show(uri: vscode.Uri, column: vscode.ViewColumn = api.ViewColumn.Beside): Promise<vscode.TextEditor> {
    // under its own scheme: no merge-conflict lenses on the recorded SEARCH/REPLACE blocks (conversationFs.ts)
    const doc = await this.ensureLanguage(await api.openTextDocument(conversationEditorUri(uri)));
    const shown = api.visibleEditors().find((e) => e.document.uri.toString() === doc.uri.toString());
    const editor = await api.showTextDocument(doc, { viewColumn: shown?.viewColumn ?? column, preserveFocus: false, preview: false });
    await this.prepare(editor);
    return editor;
  }

  /** Replace a conversation's plain-file tab by its `nagent-conversation:` editor in the same group. */
  private async reopen(e: vscode.TextEditor): Promise<void> {
    const file = e.document.uri;
    try {
      await this.show(file, e.viewColumn ?? api.ViewColumn.Active);
      const tabs = api
        .tabGroups()
        .all.flatMap((g) => g.tabs)
        .filter((t) => t.input instanceof api.TabInputText && t.input.uri.toString() === file.toString() && !t.isDirty);
      if (tabs.length) await api.tabGroups().close(tabs, true);
    } catch (err) {
      this.log.warn(`reopening ${file.fsPath} as a conversation: ${String(err)}`);
    }
  }

  /** Fold the initial context and go to the end (the editor must be the active one). */
  private async prepare(editor: vscode.TextEditor): Promise<void> {
    this.prepared.add(editor.document.uri.toString());
    const fold = conversationFolds(editor.document.getText()).find((f) => f.tag === INITIAL_CONTEXT);
    if (fold && api.activeEditor() === editor) {
      try {
        await api.commands.execute('editor.fold', { selectionLines: [fold.start], levels: 1 });
      } catch (e) {
        this.log.warn(`folding the initial context: ${String(e)}`);
      }
    }
    revealEnd(editor);
  }

  /** Save conversations the user edited, run `fn`, then show what the server appended. */
  async withSync<T>(fn: () => Promise<T>): Promise<T> {
    for (const d of api.textDocuments()) {
      if (isConversationDocument(d) && d.isDirty && onDisk(d)) {
        try {
          await d.save();
        } catch (e) {
          this.log.warn(`saving ${d.uri.fsPath} before the run: ${String(e)}`);
        }
      }
    }
    this.running++;
    try {
      return await fn();
    } finally {
      try {
        await this.refresh();
      } finally {
        this.running--;
      }
    }
  }

  /** Make every open conversation show its file on disk (VS Code reloads clean files on its own; wait for it, then force). */
  async refresh(): Promise<void> {
    const docs = api.textDocuments().filter((d) => onDisk(d) && isConversationDocument(d));
    const stale = async () => {
      const out: vscode.TextDocument[] = [];
      for (const d of docs) {
        if (d.isClosed || d.isDirty) continue;
        let disk: string;
        try {
          disk = await fs.promises.readFile(d.uri.fsPath, 'utf8');
        } catch {
          continue;
        }
        if (disk !== d.getText()) out.push(d);
      }
      return out;
    };
    const t0 = Date.now();
    let left = await stale();
    while (left.length && Date.now() - t0 < 2000) {
      await new Promise((r) => setTimeout(r, 100));
      left = await stale();
    }
    if (left.length) {
      const back = api.activeEditor();
      for (const d of left) {
        const shown = api.visibleEditors().find((e) => e.document === d);
        await api.showTextDocument(d, { viewColumn: shown?.viewColumn, preserveFocus: false, preview: false });
        await api.commands.execute('workbench.action.files.revert');
      }
      if (back) await api.showTextDocument(back.document, { viewColumn: back.viewColumn, preserveFocus: false });
    }
    for (const e of api.visibleEditors()) if (docs.includes(e.document)) revealEnd(e);
  }

  /** Show the end of a conversation in the editors that show it (after the Answers panel changed the layout). */
  revealEndOf(uri: vscode.Uri): void {
    for (const e of api.visibleEditors()) if (e.document.uri.fsPath === uri.fsPath && isConversationDocument(e.document)) revealEnd(e);
  }

  dispose(): void {
    for (const t of this.reloads.values()) clearTimeout(t);
    for (const d of this.disposables) d.dispose();
  }
}

export function revealEnd(editor: vscode.TextEditor): void {
  const last = editor.document.lineAt(editor.document.lineCount - 1);
  const end = last.range.end;
  if (api.activeEditor() === editor) editor.selection = new api.Selection(end, end);
  editor.revealRange(new api.Range(end, end), api.TextEditorRevealType.InCenterIfOutsideViewport);
}
