/**
 * Rendered Markdown beside the editor: the Answers panel, file history, summaries. A webview per
 * key, its HTML made by VS Code's own Markdown renderer (`markdown.api.render`), no scripts.
 */
import * as vscode from 'vscode';
import { createWebviewPanel, renderMarkdown } from './vscodeapi';

export const PANEL_VIEW_TYPE = 'nagent.markdown';

export interface ShownPanel {
  key: string;
  title: string;
  markdown: string;
  rendered: boolean;
}

export class MarkdownPanels implements vscode.Disposable {
  private readonly panels = new Map<string, vscode.WebviewPanel>();

  constructor(private readonly onShown?: (p: ShownPanel) => void) {}

  /** Show (or update in place) the panel `key` beside the active editor. */
  async show(key: string, title: string, markdown: string, preserveFocus = true): Promise<vscode.WebviewPanel> {
    let panel = this.panels.get(key);
    if (!panel) {
      panel = createWebviewPanel(PANEL_VIEW_TYPE, title, vscode.ViewColumn.Beside, preserveFocus);
      const created = panel;
      created.onDidDispose(() => {
        if (this.panels.get(key) === created) this.panels.delete(key);
      });
      this.panels.set(key, created);
    } else {
      panel.title = title;
      panel.reveal(panel.viewColumn, preserveFocus);
    }
    const html = await renderMarkdown(markdown);
    panel.webview.html = page(panel.webview, title, html ?? `<pre>${escapeHtml(markdown)}</pre>`);
    this.onShown?.({ key, title, markdown, rendered: html !== undefined });
    return panel;
  }

  isOpen(key: string): boolean {
    return this.panels.has(key);
  }

  dispose(): void {
    for (const p of this.panels.values()) p.dispose();
    this.panels.clear();
  }
}

function page(webview: vscode.Webview, title: string, body: string): string {
  const csp = `default-src 'none'; img-src ${webview.cspSource} https: data:; style-src 'unsafe-inline' ${webview.cspSource};`;
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
<body class="nagent-panel">${body}</body></html>`;
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}
