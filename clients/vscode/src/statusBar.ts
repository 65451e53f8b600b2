/**
 * The nagent status bar item: the server's state, the model, the tokens and cost of the last run,
 * and the runs in flight (`$(sync~spin) <model> · editing app.py`). Texts come from
 * pure/format.ts `statusBarView`; this class holds what they are made of.
 */
import type * as vscode from 'vscode';
import { isEmptyTokens, ServerState, statusBarView } from './pure/format';
import { Commands } from './pure/ids';
import type { Tokens } from './pure/protocol';
import * as api from './vscodeapi';

export interface StatusBarModel {
  state: ServerState;
  /** The model requests use (nagent.status `model`), when known. */
  model?: string | null;
  /** False when no API key or base URL is configured. */
  configured: boolean;
}

export class StatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  private current: StatusBarModel = { state: 'stopped', configured: true };
  private last: Tokens | undefined;
  /** Runs in flight (label per run). */
  private readonly work = new Map<number, string>();
  private workSeq = 0;

  constructor() {
    this.item = api.createStatusBarItem('nagent.status', api.StatusBarAlignment.Right, 100);
    this.item.name = 'nagent';
    this.item.command = Commands.showStatus;
  }

  get text(): string {
    return this.item.text;
  }

  /** The last run's tokens (undefined before the first run that spent any). */
  get lastTokens(): Tokens | undefined {
    return this.last;
  }

  update(model: StatusBarModel): void {
    this.current = { ...model };
    this.render();
  }

  /** Keep the last run's tokens; a run that spent nothing (cancelled early) keeps the previous figures. */
  noteTokens(t: Tokens | undefined): void {
    if (!t || isEmptyTokens(t)) return;
    this.last = t;
    this.render();
  }

  /** Show `label` (spinning) while `fn` runs. */
  async working<T>(label: string, fn: () => Promise<T>): Promise<T> {
    const id = ++this.workSeq;
    this.work.set(id, label);
    this.render();
    try {
      return await fn();
    } finally {
      this.work.delete(id);
      this.render();
    }
  }

  render(): void {
    const labels = [...this.work.values()];
    const running = labels.length === 0 ? undefined : labels.length === 1 ? labels[0] : `${labels.length} runs`;
    const v = statusBarView(this.current.state, this.current.model, this.last, this.current.configured, running);
    this.item.text = v.text;
    this.item.tooltip = v.tooltip;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
