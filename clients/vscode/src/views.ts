/** Read-only virtual documents (history, summaries) under the `nagent-view:` scheme. */
import * as path from 'path';
import type * as vscode from 'vscode';
import * as api from './vscodeapi';

export const VIEW_SCHEME = 'nagent-view';

export class ViewProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly contents = new Map<string, string>();
  private readonly emitter = new api.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? '';
  }

  /** A read-only snapshot `nagent-view:/<kind>/<name>` (named like the file, so it is highlighted alike). */
  put(kind: string, file: vscode.Uri, text: string): vscode.Uri {
    const name = path.basename(file.fsPath || file.path) || 'untitled';
    const uri = api.Uri.from({
      scheme: VIEW_SCHEME,
      path: `/${kind}/${name}`,
      query: new URLSearchParams({ file: file.toString(), at: String(Date.now()) }).toString(),
    });
    this.contents.set(uri.toString(), text);
    this.emitter.fire(uri);
    return uri;
  }

  /** One document per (kind, file): showing it again updates it in place. */
  async show(kind: string, file: vscode.Uri, markdown: string): Promise<vscode.TextEditor> {
    const name = path.basename(file.fsPath || file.path) || 'untitled';
    const uri = api.Uri.from({
      scheme: VIEW_SCHEME,
      path: `/${kind} — ${name}.md`,
      query: new URLSearchParams({ file: file.toString() }).toString(),
    });
    this.contents.set(uri.toString(), markdown);
    this.emitter.fire(uri);
    const doc = await api.openTextDocument(uri);
    if (doc.languageId !== 'markdown') {
      try {
        await api.setTextDocumentLanguage(doc, 'markdown');
      } catch {
        /* markdown support missing: plain text is fine */
      }
    }
    return api.showTextDocument(doc, { viewColumn: api.ViewColumn.Beside, preserveFocus: false, preview: true });
  }

  dispose(): void {
    this.emitter.dispose();
    this.contents.clear();
  }
}

/** The file a `nagent-view:` document is about, or undefined for any other document. */
export function viewSubject(uri: vscode.Uri): vscode.Uri | undefined {
  if (uri.scheme !== VIEW_SCHEME) return undefined;
  const file = new URLSearchParams(uri.query).get('file');
  return file ? api.Uri.parse(file) : undefined;
}
