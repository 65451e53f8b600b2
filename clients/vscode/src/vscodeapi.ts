/**
 * The thin seam between the extension and the `vscode` module (as in ruff-vscode): the rest of
 * the extension calls these wrappers, so the editor API it depends on is listed in one place and
 * can be replaced by a fake in tests (test/unit/seam.ts). This is the only module that imports
 * `vscode` at run time; every other one may only `import type` it (eslint's no-restricted-imports).
 */
import * as vscode from 'vscode';

// The API's classes and enums the extension constructs or compares against, re-exported as values.
export {
  CodeLens,
  EventEmitter,
  FileChangeType,
  FileSystemError,
  FileType,
  FoldingRange,
  FoldingRangeKind,
  MarkdownString,
  OverviewRulerLane,
  Position,
  ProgressLocation,
  Range,
  Selection,
  StatusBarAlignment,
  TabInputText,
  TabInputTextDiff,
  TextEditorRevealType,
  ThemeColor,
  Uri,
  ViewColumn,
  WorkspaceEdit,
} from 'vscode';

export const commands = {
  register: (id: string, fn: (...args: unknown[]) => unknown): vscode.Disposable => vscode.commands.registerCommand(id, fn),
  execute: <T = unknown>(id: string, ...args: unknown[]): Thenable<T> => vscode.commands.executeCommand<T>(id, ...args),
  setContext: (key: string, value: unknown): Thenable<unknown> => vscode.commands.executeCommand('setContext', key, value),
};

export function getConfiguration(section: string, scope?: vscode.ConfigurationScope): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(section, scope);
}

export function onDidChangeConfiguration(listener: (e: vscode.ConfigurationChangeEvent) => unknown): vscode.Disposable {
  return vscode.workspace.onDidChangeConfiguration(listener);
}

export function createOutputChannel(name: string): vscode.LogOutputChannel {
  return vscode.window.createOutputChannel(name, { log: true });
}

export function workspaceFolders(): readonly vscode.WorkspaceFolder[] | undefined {
  return vscode.workspace.workspaceFolders;
}

/** A file URI (string) relative to its workspace folder, else its base name. */
export function relativeName(uri: string): string {
  try {
    const u = vscode.Uri.parse(uri);
    const rel = vscode.workspace.asRelativePath(u, (vscode.workspace.workspaceFolders?.length ?? 0) > 1);
    return rel && rel !== u.fsPath ? rel : u.path.slice(u.path.lastIndexOf('/') + 1);
  } catch {
    return uri;
  }
}

export function getExtension<T>(id: string): vscode.Extension<T> | undefined {
  return vscode.extensions.getExtension<T>(id);
}

export function openExternal(uri: vscode.Uri): Thenable<boolean> {
  return vscode.env.openExternal(uri);
}

export function createStatusBarItem(id: string, alignment: vscode.StatusBarAlignment, priority: number): vscode.StatusBarItem {
  return vscode.window.createStatusBarItem(id, alignment, priority);
}

export function withProgress<R>(
  options: vscode.ProgressOptions,
  task: (progress: vscode.Progress<{ message?: string; increment?: number }>, token: vscode.CancellationToken) => Thenable<R>,
): Thenable<R> {
  return vscode.window.withProgress(options, task);
}

export function tabGroups(): vscode.TabGroups {
  return vscode.window.tabGroups;
}

export function activeEditor(): vscode.TextEditor | undefined {
  return vscode.window.activeTextEditor;
}

export function visibleEditors(): readonly vscode.TextEditor[] {
  return vscode.window.visibleTextEditors;
}

export function openTextDocument(uri: vscode.Uri): Thenable<vscode.TextDocument> {
  return vscode.workspace.openTextDocument(uri);
}

export function textDocuments(): readonly vscode.TextDocument[] {
  return vscode.workspace.textDocuments;
}

export function showTextDocument(doc: vscode.TextDocument | vscode.Uri, options?: vscode.TextDocumentShowOptions): Thenable<vscode.TextEditor> {
  return doc instanceof vscode.Uri ? vscode.window.showTextDocument(doc, options) : vscode.window.showTextDocument(doc, options);
}

export function applyEdit(edit: vscode.WorkspaceEdit): Thenable<boolean> {
  return vscode.workspace.applyEdit(edit);
}

export function showQuickPick<T extends vscode.QuickPickItem>(items: T[] | Thenable<T[]>, options: vscode.QuickPickOptions): Thenable<T | undefined> {
  return vscode.window.showQuickPick(items, options);
}

export function showInputBox(options: vscode.InputBoxOptions): Thenable<string | undefined> {
  return vscode.window.showInputBox(options);
}

export function showInformationMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showInformationMessage(message, ...items);
}

export function showWarningMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showWarningMessage(message, ...items);
}

/** A modal warning: the user must answer (or dismiss) before going on. */
export function showModalWarning(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showWarningMessage(message, { modal: true }, ...items);
}

/** A modal question at information level: it waits until the user answers (or dismisses it). */
export function showModalInformation(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showInformationMessage(message, { modal: true }, ...items);
}

/** A modal warning with a longer detail under its message (e.g. a list of files). */
export function showModalWarningDetail(message: string, detail: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showWarningMessage(message, { modal: true, detail }, ...items);
}

export function showErrorMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showErrorMessage(message, ...items);
}

/** A webview panel whose only script is the page's own (CSP nonce); it reads no local files. */
export function createWebviewPanel(viewType: string, title: string, column: vscode.ViewColumn, preserveFocus: boolean): vscode.WebviewPanel {
  return vscode.window.createWebviewPanel(
    viewType,
    title,
    { viewColumn: column, preserveFocus },
    { enableScripts: true, localResourceRoots: [], enableFindWidget: true, retainContextWhenHidden: false },
  );
}

export function registerTextDocumentContentProvider(scheme: string, provider: vscode.TextDocumentContentProvider): vscode.Disposable {
  return vscode.workspace.registerTextDocumentContentProvider(scheme, provider);
}

export function registerCodeLensProvider(selector: vscode.DocumentSelector, provider: vscode.CodeLensProvider): vscode.Disposable {
  return vscode.languages.registerCodeLensProvider(selector, provider);
}

export function createTextEditorDecorationType(options: vscode.DecorationRenderOptions): vscode.TextEditorDecorationType {
  return vscode.window.createTextEditorDecorationType(options);
}

export function registerCompletionItemProvider(selector: vscode.DocumentSelector, provider: vscode.CompletionItemProvider, ...triggers: string[]): vscode.Disposable {
  return vscode.languages.registerCompletionItemProvider(selector, provider, ...triggers);
}

/** Workspace files matching a glob (for the `@path` picker), excluding the usual ignored folders. */
export function findFiles(include: string, exclude: string | null, max: number): Thenable<vscode.Uri[]> {
  return vscode.workspace.findFiles(include, exclude, max);
}

export function registerFileSystemProvider(scheme: string, provider: vscode.FileSystemProvider, options: { isCaseSensitive?: boolean }): vscode.Disposable {
  return vscode.workspace.registerFileSystemProvider(scheme, provider, options);
}

export function registerFoldingRangeProvider(selector: vscode.DocumentSelector, provider: vscode.FoldingRangeProvider): vscode.Disposable {
  return vscode.languages.registerFoldingRangeProvider(selector, provider);
}

export function setTextDocumentLanguage(doc: vscode.TextDocument, languageId: string): Thenable<vscode.TextDocument> {
  return vscode.languages.setTextDocumentLanguage(doc, languageId);
}

export function onDidOpenTextDocument(listener: (d: vscode.TextDocument) => unknown): vscode.Disposable {
  return vscode.workspace.onDidOpenTextDocument(listener);
}

export function onDidChangeVisibleTextEditors(listener: (e: readonly vscode.TextEditor[]) => unknown): vscode.Disposable {
  return vscode.window.onDidChangeVisibleTextEditors(listener);
}

export function onDidCloseTextDocument(listener: (d: vscode.TextDocument) => unknown): vscode.Disposable {
  return vscode.workspace.onDidCloseTextDocument(listener);
}

export function onDidChangeActiveTextEditor(listener: (e: vscode.TextEditor | undefined) => unknown): vscode.Disposable {
  return vscode.window.onDidChangeActiveTextEditor(listener);
}

export function onDidChangeTextDocument(listener: (e: vscode.TextDocumentChangeEvent) => unknown): vscode.Disposable {
  return vscode.workspace.onDidChangeTextDocument(listener);
}

/** Render Markdown to HTML with VS Code's own Markdown extension (undefined when it is absent). */
export async function renderMarkdown(markdown: string): Promise<string | undefined> {
  try {
    const html = await vscode.commands.executeCommand<string>('markdown.api.render', markdown);
    return typeof html === 'string' ? html : undefined;
  } catch {
    return undefined;
  }
}
