/**
 * The server's `$/progress` as cancellable notifications. vscode-languageclient shows work-done
 * progress only in the status bar (no Cancel button); an LLM run takes long enough that the user
 * must be able to stop it, so the begin/report/end of each token drive a Notification-located
 * `withProgress`, and its Cancel sends `window/workDoneProgress/cancel`.
 */
import type * as vscode from 'vscode';
import * as api from './vscodeapi';
import type { ProgressToken, WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport } from 'vscode-languageclient/node';
import { progressStep } from './pure/progressMath';

type Value = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

interface Entry {
  reported: number;
  progress?: vscode.Progress<{ message?: string; increment?: number }>;
  pending: Value[];
  ended: boolean;
  done?: () => void;
}

export class NotificationProgress {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly cancel: (token: ProgressToken) => void) {}

  handle(token: ProgressToken, value: Value): void {
    const key = String(token);
    if (value.kind === 'begin') {
      if (this.entries.has(key)) return;
      const entry: Entry = { reported: 0, pending: [], ended: false };
      this.entries.set(key, entry);
      void api.withProgress(
        { location: api.ProgressLocation.Notification, title: /^nagent\b/i.test(value.title) ? value.title : `nagent: ${value.title}`, cancellable: value.cancellable === true },
        (progress, ct) => {
          entry.progress = progress;
          ct.onCancellationRequested(() => {
            if (!entry.ended) this.cancel(token);
          });
          this.apply(entry, value);
          for (const p of entry.pending.splice(0)) this.apply(entry, p);
          return new Promise<void>((resolve) => {
            entry.done = resolve;
            if (entry.ended) resolve();
          });
        },
      );
      return;
    }
    const entry = this.entries.get(key);
    if (!entry) return;
    if (value.kind === 'report') {
      if (entry.progress) this.apply(entry, value);
      else entry.pending.push(value);
      return;
    }
    entry.ended = true;
    entry.done?.();
    this.entries.delete(key);
  }

  private apply(entry: Entry, value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd): void {
    if (value.kind === 'end' || !entry.progress) return;
    const step = progressStep(entry.reported, value.percentage);
    entry.reported = step.reported;
    entry.progress.report({ message: value.message, increment: step.increment });
  }

  dispose(): void {
    for (const e of this.entries.values()) {
      e.ended = true;
      e.done?.();
    }
    this.entries.clear();
  }
}
