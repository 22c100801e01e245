// The shape of a verdict: named checks, each with the figures it was judged on.

export interface Check {
  name: string;
  pass: boolean;
  /** The numbers the check compared, by name; amounts of money in cents. */
  figures: Record<string, number>;
  /** The same figures in one line, as the text report prints them. */
  summary: string;
  /** Up to a few concrete violations, for a FAIL. */
  problems: string[];
}

export interface Verdict {
  pass: boolean;
  checks: Check[];
}

const MAX_PROBLEMS = 5;

/** Builds a Check; `problems` may be long, only the first few are kept, with a count of the rest. */
export function check(
  name: string,
  figures: Record<string, number>,
  summary: string,
  problems: string[],
  extraFailure = false,
): Check {
  const shown = problems.slice(0, MAX_PROBLEMS);
  if (problems.length > MAX_PROBLEMS) shown.push(`... and ${problems.length - MAX_PROBLEMS} more`);
  return { name, pass: problems.length === 0 && !extraFailure, figures, summary, problems: shown };
}

export function verdictOf(checks: Check[]): Verdict {
  return { pass: checks.every((c) => c.pass), checks };
}

/** Cents as 1,234,567.89 (bigint: sums of BIGINT columns can exceed 2^53 in a big book). */
export function money(cents: bigint): string {
  const negative = cents < 0n;
  const abs = negative ? -cents : cents;
  const whole = (abs / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${negative ? '-' : ''}${whole}.${(abs % 100n).toString().padStart(2, '0')}`;
}

/** Cents as a JSON number: exact below 2^53 cents (90 trillion), far beyond any book the demo seeds. */
export function cents(value: bigint): number {
  return Number(value);
}

export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** A SUM()/COUNT() column as bigint: mysql2 returns DECIMAL sums as strings and NULL for no rows. */
export function big(value: unknown): bigint {
  if (value === null || value === undefined) return 0n;
  return BigInt(String(value));
}
