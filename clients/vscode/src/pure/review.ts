/**
 * Review of a proposal (DESIGN §9) without the editor: where each hunk sits in the current text,
 * and the proposed text as the user's decisions so far make it. Pure and unit-tested.
 */
import type { Hunk, LspPosition, Proposal } from './protocol';

export type Decision = 'accept' | 'reject';

/** A hunk found in the current text: `[start, end)` are UTF-16 offsets of its old text. */
export interface LocatedHunk {
  hunk: Hunk;
  start: number;
  end: number;
}

/** Offsets of the starts of the lines of `text` (LSP line breaks: \n, \r\n, \r). */
export function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 13 /* \r */) {
      if (text.charCodeAt(i + 1) === 10) i++;
      starts.push(i + 1);
    } else if (c === 10) {
      starts.push(i + 1);
    }
  }
  return starts;
}

/** The offset of an LSP position (UTF-16), clamped to the text. */
export function offsetAt(text: string, pos: LspPosition, starts: number[] = lineStarts(text)): number {
  if (pos.line >= starts.length) return text.length;
  const lineStart = starts[Math.max(0, pos.line)];
  const next = pos.line + 1 < starts.length ? starts[pos.line + 1] : text.length;
  let lineEnd = next;
  while (lineEnd > lineStart && (text[lineEnd - 1] === '\n' || text[lineEnd - 1] === '\r')) lineEnd--;
  return Math.min(lineStart + Math.max(0, pos.character), lineEnd);
}

/** The line (0-based) of an offset. */
export function lineAt(starts: number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Find each hunk in `text`: at its range when the old text is still there, else at the occurrence
 * of its old text nearest to the range (the buffer changed above it). A hunk whose old text is gone
 * is `missing`: the server will report it as a conflict.
 */
export function locateHunks(text: string, hunks: readonly Hunk[]): { located: LocatedHunk[]; missing: Hunk[] } {
  const starts = lineStarts(text);
  const located: LocatedHunk[] = [];
  const missing: Hunk[] = [];
  for (const hunk of hunks) {
    const s = offsetAt(text, hunk.range.start, starts);
    const e = offsetAt(text, hunk.range.end, starts);
    if (text.slice(s, e) === hunk.oldText) {
      located.push({ hunk, start: s, end: e });
      continue;
    }
    if (hunk.oldText === '') {
      missing.push(hunk);
      continue;
    }
    let best = -1;
    for (let i = text.indexOf(hunk.oldText); i >= 0; i = text.indexOf(hunk.oldText, i + 1)) {
      if (best < 0 || Math.abs(i - s) < Math.abs(best - s)) best = i;
    }
    if (best < 0) missing.push(hunk);
    else located.push({ hunk, start: best, end: best + hunk.oldText.length });
  }
  located.sort((a, b) => a.start - b.start || a.end - b.end);
  // overlapping hunks cannot both be shown: keep the first
  const kept: LocatedHunk[] = [];
  for (const h of located) {
    const prev = kept[kept.length - 1];
    if (prev && h.start < prev.end) missing.push(h.hunk);
    else kept.push(h);
  }
  return { located: kept, missing };
}

export interface ProposedHunk {
  id: string;
  /** First and last line (0-based, inclusive) of the hunk's text in the proposed document. */
  startLine: number;
  endLine: number;
  decision?: Decision;
  /** The hunk's old text is no longer in the buffer. */
  missing?: boolean;
}

export interface ProposedView {
  text: string;
  hunks: ProposedHunk[];
}

/**
 * The proposed document: the current text with every hunk not rejected replaced by its new text,
 * and where each hunk landed (for the Accept/Reject lenses).
 */
export function proposedView(text: string, hunks: readonly Hunk[], decisions: ReadonlyMap<string, Decision>): ProposedView {
  const { located, missing } = locateHunks(text, hunks);
  let out = '';
  let pos = 0;
  const placed: { id: string; start: number; end: number; decision?: Decision }[] = [];
  for (const h of located) {
    out += text.slice(pos, h.start);
    const decision = decisions.get(h.hunk.id);
    const piece = decision === 'reject' ? h.hunk.oldText : h.hunk.newText;
    placed.push({ id: h.hunk.id, start: out.length, end: out.length + piece.length, decision });
    out += piece;
    pos = h.end;
  }
  out += text.slice(pos);
  const starts = lineStarts(out);
  const result: ProposedHunk[] = placed.map((p) => {
    const startLine = lineAt(starts, p.start);
    // a piece ending in a line break ends on the line before
    const lastChar = p.end > p.start ? p.end - 1 : p.start;
    const endLine = Math.max(startLine, lineAt(starts, lastChar));
    return { id: p.id, startLine, endLine, decision: p.decision };
  });
  for (const m of missing) result.push({ id: m.id, startLine: 0, endLine: 0, decision: decisions.get(m.id), missing: true });
  return { text: out, hunks: result };
}

/** Every hunk id of a proposal, in file order. */
export function hunkIds(p: Proposal): string[] {
  return p.files.flatMap((f) => f.hunks.map((h) => h.id));
}

export function undecided(p: Proposal, decisions: ReadonlyMap<string, Decision>): string[] {
  return hunkIds(p).filter((id) => !decisions.has(id));
}

/** The `accept` list for nagent.review.apply. */
export function acceptedIds(p: Proposal, decisions: ReadonlyMap<string, Decision>): string[] {
  return hunkIds(p).filter((id) => decisions.get(id) === 'accept');
}

/** The first file (index) with an undecided hunk, else -1. */
export function nextUndecidedFile(p: Proposal, decisions: ReadonlyMap<string, Decision>, after = -1): number {
  const n = p.files.length;
  for (let k = 1; k <= n; k++) {
    const i = (after + k + n) % n;
    if (p.files[i].hunks.some((h) => !decisions.has(h.id))) return i;
  }
  return -1;
}

/** "1 of 2 changes accepted, 1 rejected" style summary of an applied review. */
export function reviewOutcome(accepted: number, rejected: number, conflicts: number): string {
  const total = accepted + rejected;
  const parts = [`${accepted} of ${total} change${total === 1 ? '' : 's'} accepted`];
  if (rejected) parts.push(`${rejected} rejected`);
  if (conflicts) parts.push(`${conflicts} could not be applied (the file changed)`);
  return parts.join(', ');
}
