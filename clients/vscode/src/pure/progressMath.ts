/** LSP progress reports absolute percentages; VS Code's Progress wants increments. */
export function progressStep(reported: number, percentage: number | undefined): { increment: number | undefined; reported: number } {
  if (typeof percentage !== 'number' || !Number.isFinite(percentage)) return { increment: undefined, reported };
  const clamped = Math.max(0, Math.min(100, percentage));
  const increment = Math.max(0, clamped - reported);
  return { increment: increment > 0 ? increment : undefined, reported: reported + increment };
}
