/** Plain-text output of the admin commands: aligned columns a person reads and `awk` splits. */

/** Shown for an empty or absent value, so every row has a cell in every column. */
export const NONE = '-';

/**
 * Rows as lines with columns padded to their widest cell, two spaces apart; the last column is not
 * padded (no trailing spaces). The first row is the header. Empty cells show {@link NONE}.
 */
export function formatTable(rows: ReadonlyArray<ReadonlyArray<string | number>>): string[] {
  const cells = rows.map((row) => row.map((cell) => (cell === '' ? NONE : String(cell))));
  const widths: number[] = [];
  for (const row of cells) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return cells.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
}

/** An epoch ms time as ISO 8601 UTC, without milliseconds when they are zero; {@link NONE} for null. */
export function formatTime(epochMs: number | null): string {
  if (epochMs === null) return NONE;
  const iso = new Date(epochMs).toISOString();
  return iso.endsWith('.000Z') ? `${iso.slice(0, -5)}Z` : iso;
}
