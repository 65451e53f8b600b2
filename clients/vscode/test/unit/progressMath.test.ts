import { strict as assert } from 'assert';
import { test } from 'node:test';
import { progressStep } from '../../src/pure/progressMath';

test('absolute percentages become increments, never negative, clamped to 100', () => {
  let r = 0;
  const incs: (number | undefined)[] = [];
  for (const p of [0, 10, 10, 5, 50, 250, undefined]) {
    const s = progressStep(r, p);
    incs.push(s.increment);
    r = s.reported;
  }
  assert.deepEqual(incs, [undefined, 10, undefined, undefined, 40, 50, undefined]);
  assert.equal(r, 100);
});
