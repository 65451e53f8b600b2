/**
 * Test hook. When NAGENT_VSCODE_TEST_REPORT=<file> is set in the extension host's environment,
 * every nagent.vscode.* command appends one JSON line to <file> when it finishes: the command, its
 * server result or error, and the active/visible documents with their text. The end-to-end test
 * reads these lines instead of scraping the editor's DOM. Off (no file access at all) otherwise.
 */
import * as fs from 'fs';

export const REPORT_ENV = 'NAGENT_VSCODE_TEST_REPORT';

export interface DocumentSnapshot {
  uri: string;
  fsPath?: string;
  languageId?: string;
  version?: number;
  isDirty?: boolean;
  text?: string;
}

export interface ReportInput {
  event: string;
  ok: boolean;
  result?: unknown;
  error?: string;
  activeDocument?: DocumentSnapshot;
  visibleDocuments?: string[];
  [extra: string]: unknown;
}

export interface ReportRecord extends ReportInput {
  seq: number;
  time: string;
}

export class TestReporter {
  private seq = 0;
  constructor(readonly file: string | undefined) {}

  static fromEnv(env: NodeJS.ProcessEnv = process.env): TestReporter {
    const f = env[REPORT_ENV];
    return new TestReporter(f && f.trim() ? f : undefined);
  }

  get enabled(): boolean {
    return this.file !== undefined;
  }

  write(record: ReportInput): ReportRecord | undefined {
    if (!this.file) return undefined;
    const full: ReportRecord = { seq: ++this.seq, time: new Date().toISOString(), ...record };
    fs.appendFileSync(this.file, JSON.stringify(full) + '\n', 'utf8');
    return full;
  }
}

/** Parse a JSONL report (tolerates a torn last line while it is being written). */
export function readReport(text: string): ReportRecord[] {
  const out: ReportRecord[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as ReportRecord);
    } catch {
      /* partial line */
    }
  }
  return out;
}
