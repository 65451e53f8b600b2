/**
 * What a run's result says besides its answer, as lines to show after it (Answers panel, notification,
 * log): files that usually change with the target and were not touched (`coupling[].message`, issue 26),
 * lines that a recent fix wrote (`historyWarnings`), `@path` mentions that were not included (issue 25).
 * The server formats each sentence; the client only lists them.
 */
import type { Coupling, Mention } from './protocol';
import type { Notice } from './format';

export interface RunNotes {
  coupling?: Coupling[] | null;
  historyWarnings?: { uri: string; line: number; message: string }[] | null;
  mentions?: Mention[] | null;
}

export function runWarnings(r: RunNotes, name: (uri: string) => string = (u) => u): string[] {
  const out: string[] = [];
  for (const c of r.coupling ?? []) if (c && typeof c.message === 'string' && c.message) out.push(c.message);
  for (const w of r.historyWarnings ?? []) {
    if (w && typeof w.message === 'string' && w.message) out.push(`${name(w.uri)}:${(w.line ?? 0) + 1}: ${w.message}`);
  }
  for (const m of r.mentions ?? []) {
    if (m && !m.included) out.push(`@${m.path} was not included${m.reason ? `: ${m.reason}` : ''}`);
  }
  return out;
}

/** A notice followed by the run's warnings (the first two; the Answers panel lists them all); a warning then. */
export function withWarnings(n: Notice, warnings: string[]): Notice {
  if (warnings.length === 0) return n;
  const shown = warnings.slice(0, 2).join('; ') + (warnings.length > 2 ? `; +${warnings.length - 2} more` : '');
  const sep = /[.!?)]$/.test(n.message) ? ' ' : '. ';
  return { level: 'warning', message: `${n.message}${sep}⚠ ${shown}` };
}
