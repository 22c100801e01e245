// The stock verdict: exactly the initial stock was sold, one sale per unit, never below zero.
// qty_before of the sales must be exactly initial..1, each once: a repeated level is a sale decided
// on a stale read (a lost deduction), which is how an oversell hides behind a final stock of 0.
import type { Knex } from 'knex';
import { check, count, verdictOf, type Check, type Verdict } from './check.js';
import { checkLocksClean } from './locks-clean.js';

type Rows<T> = [T[], unknown];

async function checkStock(db: Knex): Promise<Check[]> {
  const [[stock]] = (await db.raw('SELECT initial_qty, qty FROM stock')) as Rows<{ initial_qty: number; qty: number }>;
  if (!stock) return [check('Stock row exists', { stockRows: 0 }, 'no stock row', ['the stock table is empty'])];
  const [sales] = (await db.raw('SELECT id, qty_before, qty_after FROM deductions ORDER BY id')) as Rows<{
    id: number;
    qty_before: number;
    qty_after: number;
  }>;
  const seen = new Map<number, number>();
  for (const s of sales) seen.set(s.qty_before, (seen.get(s.qty_before) ?? 0) + 1);
  const repeated = [...seen].filter(([, n]) => n > 1).sort((a, b) => b[1] - a[1] || b[0] - a[0]);
  const lost = repeated.reduce((sum, [, n]) => sum + n - 1, 0);
  const missing = Array.from({ length: stock.initial_qty }, (_, i) => i + 1).filter((q) => !seen.has(q));
  const lowest = Math.min(stock.qty, ...sales.map((s) => s.qty_after));
  return [
    check(
      'Final stock is exactly 0',
      { initial: stock.initial_qty, final: stock.qty },
      `initial ${stock.initial_qty}, final ${stock.qty}`,
      stock.qty === 0 ? [] : [`final stock is ${stock.qty}, not 0`],
    ),
    check(
      'Stock never negative',
      { lowest },
      `lowest level recorded ${lowest}`,
      lowest >= 0 ? [] : [`stock went down to ${lowest}`],
    ),
    check(
      `Exactly ${stock.initial_qty} successful deductions`,
      { deductions: sales.length, units: stock.initial_qty },
      `${count(sales.length)} deductions for ${stock.initial_qty} units` +
        (sales.length > stock.initial_qty ? ` (oversold by ${sales.length - stock.initial_qty})` : ''),
      sales.length === stock.initial_qty ? [] : [`${sales.length} units sold from a stock of ${stock.initial_qty}`],
    ),
    check(
      'Each unit sold once (no lost deduction)',
      { levelsSold: seen.size, lostDeductions: lost, levelsNeverSold: missing.length },
      `${count(seen.size)} distinct stock levels sold from, ${count(lost)} sales decided on a level another sale had already taken, ${count(missing.length)} levels never sold`,
      [
        ...repeated.map(([q, n]) => `${n} sales all read stock ${q} and wrote ${q - 1}: ${n - 1} deduction(s) lost`),
        ...(missing.length > 0
          ? [`levels never sold from: ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', ...' : ''}`]
          : []),
      ],
    ),
  ];
}

export async function verifyStock(db: Knex): Promise<Verdict> {
  return verdictOf([...(await checkStock(db)), await checkLocksClean(db)]);
}
