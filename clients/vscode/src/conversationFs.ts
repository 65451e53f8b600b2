/**
 * Conversations are edited through their own URI scheme, `nagent-conversation:` (the same path), backed
 * by the file on disk. Why: VS Code's built-in merge-conflict extension puts "Accept Current Change"
 * CodeLenses and conflict decorations on every `<<<<<<< SEARCH / ======= / >>>>>>> REPLACE` block the
 * model wrote (issue 25 #3), and one click rewrites the record the model reads next. That extension reads
 * its settings without a language scope (so `[nagent-conversation]` defaults cannot turn it off) and
 * registers its lenses only for the `file`, `untitled`, `vscode-vfs` and `vscode-userdata` schemes — a
 * conversation shown under its own scheme never gets them. The record syntax stays what the model is
 * taught (changing it would be a server and prompt change for every editor).
 *
 * The provider reads and writes the file itself and watches its folder (the server replaces the file
 * atomically, so a watch on the file alone would stop at the first append).
 */
import * as fs from 'fs';
import * as path from 'path';
import type * as vscode from 'vscode';
import * as api from './vscodeapi';

export const CONVERSATION_SCHEME = 'nagent-conversation';

/** The conversation's editor URI for a file URI (or path). */
export function conversationEditorUri(file: vscode.Uri): vscode.Uri {
  return file.scheme === CONVERSATION_SCHEME ? file : api.Uri.from({ scheme: CONVERSATION_SCHEME, path: file.path });
}

/** The file URI of a conversation editor URI (what the server knows). */
export function conversationFileUri(uri: vscode.Uri): vscode.Uri {
  return uri.scheme === CONVERSATION_SCHEME ? api.Uri.file(uri.fsPath) : uri;
}

export class ConversationFileSystem implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly emitter = new api.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.emitter.event;
  /** One watcher per folder, shared by the conversations in it. */
  private readonly watchers = new Map<string, { watcher: fs.FSWatcher; files: Map<string, number> }>();

  watch(uri: vscode.Uri): vscode.Disposable {
    const file = uri.fsPath;
    const dir = path.dirname(file);
    let w = this.watchers.get(dir);
    if (!w) {
      const files = new Map<string, number>();
      let watcher: fs.FSWatcher;
      try {
        watcher = fs.watch(dir, (_event, name) => {
          const n = name?.toString();
          if (!n || !files.has(path.join(dir, n))) return;
          this.emitter.fire([{ type: api.FileChangeType.Changed, uri: api.Uri.from({ scheme: CONVERSATION_SCHEME, path: api.Uri.file(path.join(dir, n)).path }) }]);
        });
      } catch {
        return { dispose: () => undefined };
      }
      w = { watcher, files };
      this.watchers.set(dir, w);
    }
    const entry = w;
    entry.files.set(file, (entry.files.get(file) ?? 0) + 1);
    return {
      dispose: () => {
        const n = (entry.files.get(file) ?? 1) - 1;
        if (n > 0) entry.files.set(file, n);
        else entry.files.delete(file);
        if (entry.files.size === 0) {
          entry.watcher.close();
          this.watchers.delete(dir);
        }
      },
    };
  }

  stat(uri: vscode.Uri): vscode.FileStat {
    try {
      const st = fs.statSync(uri.fsPath);
      return { type: st.isDirectory() ? api.FileType.Directory : api.FileType.File, ctime: st.ctimeMs, mtime: st.mtimeMs, size: st.size };
    } catch {
      throw api.FileSystemError.FileNotFound(uri);
    }
  }

  readFile(uri: vscode.Uri): Uint8Array {
    try {
      return fs.readFileSync(uri.fsPath);
    } catch {
      throw api.FileSystemError.FileNotFound(uri);
    }
  }

  writeFile(uri: vscode.Uri, content: Uint8Array): void {
    // the user's save of a conversation they edited (as VS Code would write the file itself)
    fs.writeFileSync(uri.fsPath, content);
  }

  readDirectory(): [string, vscode.FileType][] {
    return [];
  }

  createDirectory(uri: vscode.Uri): void {
    throw api.FileSystemError.NoPermissions(uri);
  }

  delete(uri: vscode.Uri): void {
    throw api.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): void {
    throw api.FileSystemError.NoPermissions(uri);
  }

  dispose(): void {
    for (const w of this.watchers.values()) w.watcher.close();
    this.watchers.clear();
    this.emitter.dispose();
  }
}
