/**
 * The answer as it arrives (`nagent/stream`, contracts.md A): the deltas of one run's latest model
 * reply, kept per run so that the Answers panel can show them live. A new `turn` (a retry, a
 * correction) starts the text afresh; `done` marks the reply complete. Pure and unit-tested.
 */
import type { StreamParams } from './protocol';

export interface LiveAnswer {
  /** The Answers entry this stream updates: `stream:<uri>` (the run's target file). */
  key: string;
  uri: string;
  token: string | number | null;
  turn: number;
  text: string;
  done: boolean;
}

export class StreamAnswers {
  private readonly live = new Map<string, LiveAnswer>();

  static keyOf(uri: string): string {
    return `stream:${uri}`;
  }

  /** Apply one notification; returns the run's answer so far (undefined for malformed params). */
  apply(p: StreamParams): LiveAnswer | undefined {
    if (!p || typeof p.uri !== 'string' || typeof p.delta !== 'string') return undefined;
    const key = StreamAnswers.keyOf(p.uri);
    let a = this.live.get(key);
    const turn = typeof p.turn === 'number' ? p.turn : 0;
    if (!a || a.turn !== turn || (a.done && p.delta !== '')) {
      // a new reply (or a new run on the same file after the last one ended): start fresh
      a = { key, uri: p.uri, token: p.token ?? null, turn, text: '', done: false };
      this.live.set(key, a);
    }
    a.text += p.delta;
    if (p.done) a.done = true;
    return a;
  }

  get(uri: string): LiveAnswer | undefined {
    return this.live.get(StreamAnswers.keyOf(uri));
  }

  /** The run ended (its result arrived): forget its stream, return its key if it streamed. */
  take(uri: string): string | undefined {
    const key = StreamAnswers.keyOf(uri);
    return this.live.delete(key) ? key : undefined;
  }
}
