// Every claim has exactly one owner at every moment, and no claim was sold twice: the transfers of a
// claim, in commit order, form a chain (each seller is the previous buyer, the first seller the
// original investor, the last buyer the current owner), and every payment went to the owner of the time.
import type { Knex } from 'knex';
import { check, count, type Check } from './check.js';
import { micros } from './db-time.js';

type Rows<T> = [T[], unknown];

interface Link {
  id: number;
  seller: number;
  buyer: number;
  at: number;
}

export async function checkClaimChains(db: Knex): Promise<Check> {
  const [claims] = (await db.raw(
    `SELECT c.id, c.original_investor_id AS original, c.investor_id AS owner, i.id AS owner_exists
       FROM claims c LEFT JOIN investors i ON i.id = c.investor_id`,
  )) as Rows<{ id: number; original: number; owner: number; owner_exists: number | null }>;
  const [transfers] = (await db.raw(
    `SELECT id, claim_id, seller_id, buyer_id, ${micros('committed_at')} AS at FROM transfers ORDER BY claim_id, committed_at, id`,
  )) as Rows<{ id: number; claim_id: number; seller_id: number; buyer_id: number; at: number | string }>;
  const [payments] = (await db.raw(
    `SELECT id, claim_id, investor_id, ${micros('committed_at')} AS at FROM payments`,
  )) as Rows<{ id: number; claim_id: number; investor_id: number; at: number | string }>;

  const chains = new Map<number, Link[]>();
  for (const t of transfers) {
    const list = chains.get(t.claim_id) ?? [];
    list.push({ id: t.id, seller: t.seller_id, buyer: t.buyer_id, at: Number(t.at) });
    chains.set(t.claim_id, list);
  }
  const problems: string[] = [];
  const byId = new Map(claims.map((c) => [c.id, c]));
  for (const t of transfers) {
    if (!byId.has(t.claim_id)) problems.push(`transfer ${t.id} is of claim ${t.claim_id}, which does not exist`);
  }
  let resold = 0;
  for (const c of claims) {
    if (c.owner_exists === null) problems.push(`claim ${c.id} is owned by investor ${c.owner}, who does not exist`);
    let owner = c.original;
    for (const link of chains.get(c.id) ?? []) {
      if (link.seller !== owner) {
        resold += 1;
        problems.push(
          `claim ${c.id}: transfer ${link.id} sold it from investor ${link.seller}, but investor ${owner} owned it then (sold twice)`,
        );
      }
      owner = link.buyer;
    }
    if (owner !== c.owner)
      problems.push(`claim ${c.id}: its transfers end with investor ${owner}, but investor ${c.owner} owns it`);
  }
  let misdirected = 0;
  for (const p of payments) {
    const claim = byId.get(p.claim_id);
    if (!claim) {
      problems.push(`payment ${p.id} is for claim ${p.claim_id}, which does not exist`);
      continue;
    }
    const at = Number(p.at);
    let owner = claim.original;
    for (const link of chains.get(p.claim_id) ?? []) if (link.at < at) owner = link.buyer;
    if (owner !== p.investor_id) {
      misdirected += 1;
      problems.push(
        `payment ${p.id} on claim ${p.claim_id} went to investor ${p.investor_id}, but investor ${owner} owned the claim then`,
      );
    }
  }
  const figures = {
    claims: claims.length,
    claimsTransferred: chains.size,
    transfers: transfers.length,
    brokenLinks: resold,
    payments: payments.length,
    paymentsToNonOwner: misdirected,
  };
  const summary =
    `${count(claims.length)} claims, ${count(chains.size)} changed hands in ${count(transfers.length)} transfers; ` +
    `${count(resold)} broken links (claim sold by a non-owner), ${count(misdirected)} of ${count(payments.length)} payments to a non-owner`;
  return check('Every claim has one owner, none sold twice', figures, summary, problems);
}
