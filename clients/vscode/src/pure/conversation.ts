/**
 * The conversation file as a document (DESIGN §2): which paths are conversations, which lines fold,
 * and the request a user typed at its end. Pure and unit-tested.
 */

export const LANGUAGE_ID = 'nagent-conversation';
export const INITIAL_CONTEXT = 'initial_context';

/** `<state root>/conversations/<slug>-<uuid4>` (archives and `saved/<name>` too), not the index. */
export function isConversationPath(p: string): boolean {
  const norm = p.replace(/\\/g, '/');
  const m = /\/conversations\/(saved\/)?([^/]+)$/.exec(norm);
  if (!m) return false;
  const name = m[2];
  if (name === 'file-index.json' || name.endsWith('.tmp') || name.startsWith('.')) return false;
  return m[1] !== undefined || /-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i.test(name) || norm.includes('/.nagent/');
}

export interface Fold {
  /** 0-based first and last line. */
  start: number;
  end: number;
  tag: string;
}

const OPEN = /^\s*<([A-Za-z_][\w.:-]*)(\s[^>]*)?>(.*)$/;

/** One fold per block that spans several lines: `<tag …>` on a line … the line holding `</tag>`. */
export function conversationFolds(text: string): Fold[] {
  const lines = text.split(/\r\n|\r|\n/);
  const folds: Fold[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = OPEN.exec(lines[i]);
    if (!m || lines[i].trimEnd().endsWith('/>')) continue;
    const tag = m[1];
    const close = `</${tag}>`;
    if (m[3].includes(close)) continue;
    let j = i + 1;
    while (j < lines.length && !lines[j].includes(close)) j++;
    if (j >= lines.length) continue;
    if (j > i) folds.push({ start: i, end: j, tag });
    i = j;
  }
  return folds;
}

const BLOCK_END = /(<\/[A-Za-z_][\w.:-]*>\s*$)|(^\s*<[A-Za-z_][\w.:-]*(\s[^>]*)?\/>\s*$)|(^Interrupted\.\.\.\s*$)/;

/**
 * Free text the user typed after the conversation's last block: the next request. Returns it with
 * the offset where it starts (so it can be taken out of the buffer before it is sent as a request).
 */
export function trailingRequest(text: string): { request: string; start: number } | undefined {
  const re = /\r\n|\r|\n/g;
  let lineStart = 0;
  let afterLastBlock = 0;
  for (;;) {
    const m = re.exec(text);
    const lineEnd = m ? m.index : text.length;
    const line = text.slice(lineStart, lineEnd);
    if (BLOCK_END.test(line)) afterLastBlock = m ? m.index + m[0].length : text.length;
    if (!m) break;
    lineStart = m.index + m[0].length;
  }
  const tail = text.slice(afterLastBlock);
  const request = tail.trim();
  if (!request) return undefined;
  return { request, start: afterLastBlock + (tail.length - tail.trimStart().length) };
}

/**
 * Whether a change of a conversation's buffer should move its editor to the end: only a reload from disk
 * (the buffer holds the file's text, not dirty) while one of our runs may append to it. Never for the
 * user's own typing — anywhere: moving the selection while they type sends the next characters to the
 * end (issue 25 #3); after a run the editor is shown at its end anyway.
 */
export function shouldFollowEnd(c: { dirty: boolean; running: boolean; matchesDisk: boolean }): boolean {
  return !c.dirty && c.running && c.matchesDisk;
}

/** `@path`, quoted when the path has spaces (`@"a b.py"`, contracts.md D). */
export function mentionText(rel: string): string {
  return /\s|"/.test(rel) ? `@"${rel.replace(/"/g, '\\"')}"` : `@${rel}`;
}

/**
 * The hint at the end of a conversation (issue 25: "the conversation is empty before the first request,
 * with no hint how to send"): where it goes (0-based line) and what it says; the text changes once a
 * request is typed there.
 */
export function draftHint(text: string): { line: number; title: string } {
  const lines = text.split(/\r\n|\r|\n/);
  const line = Math.max(0, lines.length - 1);
  const typed = trailingRequest(text);
  if (typed) return { line, title: '$(send) Send this request (Ctrl+Enter)' };
  return { line, title: text.trim() === '' ? '$(comment-discussion) Type your first request here, then press Ctrl+Enter to send it' : '$(comment-discussion) Type your next request below, then press Ctrl+Enter to send it' };
}
