/** A number for a table cell: '-' when there is none. */
export const fmt = (n: number | null | undefined, digits = 0): string =>
  n === undefined || n === null || Number.isNaN(n) ? '-' : n.toFixed(digits);
