/**
 * Rendered Markdown beside the editor: the Answers panel, file history, summaries. A webview per
 * key, its HTML made by VS Code's own Markdown renderer (`markdown.api.render`).
 *
 * The page is set once; each content (the first and every update) is posted to it once its script
 * said `ready`, and it answers `rendered`. Replacing `webview.html` instead reloads the page, which
 * is blank until the reload finishes (a screenshot right after an update showed an empty panel),
 * and a message posted before the page listens is lost. A panel hidden behind another tab loses
 * its page (retainContextWhenHidden: false); shown again, it reloads, says `ready`, and gets the
 * current content again.
 */
import { randomBytes } from 'crypto';
import type * as vscode from 'vscode';
import * as api from './vscodeapi';

export const PANEL_VIEW_TYPE = 'nagent.markdown';
/** How long show() waits for the page to display the content before it reports anyway. */
const DISPLAY_TIMEOUT_MS = 5000;

export interface ShownPanel {
  key: string;
  title: string;
  markdown: string;
  rendered: boolean;
  /** The page confirmed that it shows this content (false: it did not answer in time). */
  displayed: boolean;
}

interface RenderMessage {
  type: 'render';
  seq: number;
  title: string;
  body: string;
}

interface Entry {
  panel: vscode.WebviewPanel;
  /** The page's script is listening (reset when the page is discarded while hidden). */
  ready: boolean;
  seq: number;
  current?: RenderMessage;
  /** The highest seq the page displayed. */
  displayed: number;
  waiters: { seq: number; resolve: (shown: boolean) => void }[];
}

export class MarkdownPanels implements vscode.Disposable {
  private readonly panels = new Map<string, Entry>();

  constructor(private readonly onShown?: (p: ShownPanel) => void) {}

  /** Show (or update in place) the panel `key` beside the active editor. */
  async show(key: string, title: string, markdown: string, preserveFocus = true): Promise<vscode.WebviewPanel> {
    let entry = this.panels.get(key);
    if (!entry) {
      entry = this.create(key, title, preserveFocus);
    } else {
      entry.panel.title = title;
      entry.panel.reveal(entry.panel.viewColumn, preserveFocus);
    }
    const html = await api.renderMarkdown(markdown);
    const seq = ++entry.seq;
    entry.current = { type: 'render', seq, title, body: html ?? `<pre>${escapeHtml(markdown)}</pre>` };
    const displayed = await this.deliver(entry, seq);
    this.onShown?.({ key, title, markdown, rendered: html !== undefined, displayed });
    return entry.panel;
  }

  isOpen(key: string): boolean {
    return this.panels.has(key);
  }

  private create(key: string, title: string, preserveFocus: boolean): Entry {
    const panel = api.createWebviewPanel(PANEL_VIEW_TYPE, title, api.ViewColumn.Beside, preserveFocus);
    const entry: Entry = { panel, ready: false, seq: 0, displayed: 0, waiters: [] };
    panel.webview.onDidReceiveMessage((m: unknown) => this.receive(entry, m));
    panel.onDidChangeViewState((e) => {
      if (!e.webviewPanel.visible) entry.ready = false; // its page is discarded; it says ready again when shown
    });
    panel.onDidDispose(() => {
      if (this.panels.get(key) === entry) this.panels.delete(key);
      for (const w of entry.waiters.splice(0)) w.resolve(false);
    });
    panel.webview.html = page(panel.webview, title);
    this.panels.set(key, entry);
    return entry;
  }

  private receive(entry: Entry, m: unknown): void {
    const msg = m as { type?: unknown; seq?: unknown } | undefined;
    if (msg?.type === 'ready') {
      entry.ready = true;
      if (entry.current) void entry.panel.webview.postMessage(entry.current);
    } else if (msg?.type === 'rendered' && typeof msg.seq === 'number') {
      entry.displayed = Math.max(entry.displayed, msg.seq);
      entry.waiters = entry.waiters.filter((w) => {
        if (w.seq > entry.displayed) return true;
        w.resolve(true);
        return false;
      });
    }
  }

  /** Post the current content (now if the page listens, else on its `ready`); true once it shows it. */
  private deliver(entry: Entry, seq: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        entry.waiters = entry.waiters.filter((w) => w.resolve !== done);
        resolve(false);
      }, DISPLAY_TIMEOUT_MS);
      const done = (shown: boolean): void => {
        clearTimeout(timer);
        resolve(shown);
      };
      entry.waiters.push({ seq, resolve: done });
      if (entry.ready && entry.current) void entry.panel.webview.postMessage(entry.current);
    });
  }

  dispose(): void {
    for (const e of [...this.panels.values()]) e.panel.dispose();
    this.panels.clear();
  }
}

/** The page: styles, an empty body, and the script that shows each posted content. */
function page(webview: vscode.Webview, title: string): string {
  const nonce = randomBytes(16).toString('base64');
  const csp = `default-src 'none'; img-src ${webview.cspSource} https: data:; style-src 'unsafe-inline' ${webview.cspSource}; script-src 'nonce-${nonce}';`;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${escapeHtml(title)}</title>
<style>
  body { font-family: var(--vscode-markdown-font-family, var(--vscode-font-family)); font-size: var(--vscode-markdown-font-size, 14px);
         line-height: 1.5; color: var(--vscode-foreground); padding: 0 20px 20px; max-width: 980px; }
  h1, h2, h3 { font-weight: 600; border-bottom: 1px solid var(--vscode-widget-border, rgba(128,128,128,.3)); padding-bottom: .2em; }
  h3 { font-size: 1.1em; }
  code { font-family: var(--vscode-editor-font-family); background: var(--vscode-textCodeBlock-background); padding: 1px 4px; border-radius: 3px; }
  pre { background: var(--vscode-textCodeBlock-background); padding: 8px 12px; overflow-x: auto; border-radius: 4px; }
  pre code { background: none; padding: 0; }
  table { border-collapse: collapse; margin: 8px 0; }
  th, td { border: 1px solid var(--vscode-widget-border, rgba(128,128,128,.35)); padding: 3px 10px; }
  th { text-align: left; }
  blockquote { margin: 0; padding: 2px 12px; border-left: 4px solid var(--vscode-textBlockQuote-border, #888);
               background: var(--vscode-textBlockQuote-background); }
  hr { border: 0; border-top: 1px solid var(--vscode-widget-border, rgba(128,128,128,.35)); margin: 18px 0; }
  em { color: var(--vscode-descriptionForeground); }
</style></head>
<body class="nagent-panel"><main id="content"></main>
<script nonce="${nonce}">
  const vscode = acquireVsCodeApi();
  window.addEventListener('message', (event) => {
    const m = event.data;
    if (!m || m.type !== 'render') return;
    document.title = m.title;
    document.getElementById('content').innerHTML = m.body;
    window.scrollTo(0, 0);
    vscode.postMessage({ type: 'rendered', seq: m.seq });
  });
  vscode.postMessage({ type: 'ready' });
</script></body></html>`;
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
