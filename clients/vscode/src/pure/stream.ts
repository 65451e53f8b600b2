/**
 * The answer as it arrives (`nagent/stream`, contracts.md A): the deltas of one run's latest model
 * reply, kept per run so that the Answers panel can show them live. A new `turn` (a retry, a
 * correction) starts the text afresh; `done` marks the reply complete. Pure and unit-tested.
 */
import type { StreamParams } from './protocol';

export interface LiveAnswer {
  /** The Answers entry this reply updates: `stream:<uri>#<n>`, new for every reply that starts afresh. */
  key: string;
  uri: string;
  token: string | number | null;
  turn: number;
  text: string;
  done: boolean;
}

export class StreamAnswers {
  /** The reply being streamed per target file (uri). */
  private readonly live = new Map<string, LiveAnswer>();
  private seq = 0;

  /** Apply one notification; returns the run's answer so far (undefined for malformed params). */
  apply(p: StreamParams): LiveAnswer | undefined {
    if (!p || typeof p.uri !== 'string' || typeof p.delta !== 'string') return undefined;
    let a = this.live.get(p.uri);
    const turn = typeof p.turn === 'number' ? p.turn : 0;
    if (!a || a.turn !== turn || (a.done && p.delta !== '')) {
      // a new reply of the same run (retry, correction, next turn) replaces the text in the run's entry;
      // the first reply after take() (a new run) gets an entry of its own
      const key = a ? a.key : `stream:${p.uri}#${++this.seq}`;
      a = { key, uri: p.uri, token: p.token ?? null, turn, text: '', done: false };
      this.live.set(p.uri, a);
    }
    a.text += p.delta;
    if (p.done) a.done = true;
    return a;
  }

  get(uri: string): LiveAnswer | undefined {
    return this.live.get(uri);
  }

  /** The run on `uri` ended (its result arrived): forget its stream, return its entry's key if it streamed. */
  take(uri: string): string | undefined {
    const a = this.live.get(uri);
    this.live.delete(uri);
    return a?.key;
  }
}
