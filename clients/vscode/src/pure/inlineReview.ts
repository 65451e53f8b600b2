/**
 * Review in the source editor (issue 25 "review in the source buffer"): where each pending hunk of a
 * proposal sits in the file's current text, which hunk the cursor is on, and the text shown inline.
 * Pure and unit-tested; src/inlineReview.ts draws it.
 */
import type { Hunk } from './protocol';
import { lineAt, lineStarts, locateHunks } from './review';

export interface InlineHunk {
  proposalId: string;
  hunk: Hunk;
  /** 0-based lines of the hunk's old text in the current text (an insertion: the line it goes before). */
  startLine: number;
  endLine: number;
  /** Insertion only: nothing is removed. */
  insertion: boolean;
}

/** Pending hunks of several proposals placed in `text`; hunks whose old text is gone are left out. */
export function placeHunks(text: string, proposals: { id: string; hunks: readonly Hunk[] }[]): InlineHunk[] {
  const starts = lineStarts(text);
  const out: InlineHunk[] = [];
  for (const p of proposals) {
    const { located } = locateHunks(text, p.hunks.filter((h) => h.applies !== false));
    for (const l of located) {
      const startLine = lineAt(starts, l.start);
      const insertion = l.end === l.start;
      // old text ending in a line break ends on the line before
      const endLine = insertion ? startLine : Math.max(startLine, lineAt(starts, l.end - 1));
      out.push({ proposalId: p.id, hunk: l.hunk, startLine, endLine, insertion });
    }
  }
  return out.sort((a, b) => a.startLine - b.startLine);
}

/** The hunk at a line: the one that holds it, else the nearest one (below first, then above). */
export function hunkAtLine(hunks: readonly InlineHunk[], line: number): InlineHunk | undefined {
  const hit = hunks.find((h) => h.startLine <= line && line <= h.endLine);
  if (hit) return hit;
  let best: InlineHunk | undefined;
  let bestDistance = Infinity;
  for (const h of hunks) {
    const d = h.startLine > line ? h.startLine - line : line - h.endLine + 0.5;
    if (d < bestDistance) {
      best = h;
      bestDistance = d;
    }
  }
  return best;
}

/** The ghost text after a hunk: its first new line and how many more, or what it removes. */
export function inlineSummary(h: Hunk): string {
  const lines = h.newText.replace(/\r?\n$/, '').split(/\r?\n/);
  const removed = h.oldText === '' ? 0 : h.oldText.replace(/\r?\n$/, '').split(/\r?\n/).length;
  if (h.newText === '') return `− ${removed} line${removed === 1 ? '' : 's'} removed`;
  const first = lines[0].trim();
  const shown = first.length > 60 ? first.slice(0, 59) + '…' : first;
  const more = lines.length > 1 ? ` (+${lines.length - 1} more line${lines.length === 2 ? '' : 's'})` : '';
  return `→ ${shown}${more}`;
}

/** The args of nagent.review.apply / .discard for one hunk, the others kept pending. */
export function decideArgs(proposalId: string, hunkId: string, decision: 'accept' | 'reject'): { command: 'nagent.review.apply' | 'nagent.review.discard'; arg: Record<string, unknown> } {
  return decision === 'accept'
    ? { command: 'nagent.review.apply', arg: { id: proposalId, accept: [hunkId], rest: 'keep' } }
    : { command: 'nagent.review.discard', arg: { id: proposalId, hunks: [hunkId] } };
}
