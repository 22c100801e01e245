// The lending book: investors with balances, loans, claims (an investor's share of a loan), and the
// business rows every locked operation writes. Money is BIGINT cents throughout: floats lose cents.
// Every business row carries the grant id it was written under and a database-clock time taken
// inside its transaction, so the verifier can line business commits up against t_lock_log.
import type { Knex } from 'knex';

export const LENDING_TABLES: readonly string[] = [
  `CREATE TABLE investors (
    id                     INT UNSIGNED NOT NULL,
    name                   VARCHAR(64)  NOT NULL,
    initial_balance_cents  BIGINT       NOT NULL,
    balance_cents          BIGINT       NOT NULL,
    PRIMARY KEY (id)
  ) ENGINE=InnoDB`,
  `CREATE TABLE loans (
    id               VARCHAR(32)  NOT NULL,
    borrower         VARCHAR(64)  NOT NULL,
    principal_cents  BIGINT       NOT NULL,
    monthly_rate_bp  INT UNSIGNED NOT NULL,
    installments     INT UNSIGNED NOT NULL,
    PRIMARY KEY (id)
  ) ENGINE=InnoDB`,
  // original_investor_id never changes: the transfer chain of a claim starts from it.
  `CREATE TABLE claims (
    id                    INT UNSIGNED NOT NULL,
    loan_id               VARCHAR(32)  NOT NULL,
    original_investor_id  INT UNSIGNED NOT NULL,
    investor_id           INT UNSIGNED NOT NULL,
    principal_cents       BIGINT       NOT NULL,
    outstanding_cents     BIGINT       NOT NULL,
    PRIMARY KEY (id),
    KEY ix_claims_loan (loan_id)
  ) ENGINE=InnoDB`,
  `CREATE TABLE repayments (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    loan_id       VARCHAR(32)  NOT NULL,
    grant_id      BIGINT UNSIGNED NOT NULL,
    worker        VARCHAR(64)  NOT NULL,
    amount_cents  BIGINT       NOT NULL,
    committed_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY ix_repayments_grant (grant_id)
  ) ENGINE=InnoDB`,
  `CREATE TABLE payments (
    id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    repayment_id     BIGINT UNSIGNED NOT NULL,
    grant_id         BIGINT UNSIGNED NOT NULL,
    claim_id         INT UNSIGNED NOT NULL,
    investor_id      INT UNSIGNED NOT NULL,
    principal_cents  BIGINT       NOT NULL,
    interest_cents   BIGINT       NOT NULL,
    committed_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY ix_payments_grant (grant_id),
    KEY ix_payments_repayment (repayment_id)
  ) ENGINE=InnoDB`,
  `CREATE TABLE transfers (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    claim_id      INT UNSIGNED NOT NULL,
    loan_id       VARCHAR(32)  NOT NULL,
    seller_id     INT UNSIGNED NOT NULL,
    buyer_id      INT UNSIGNED NOT NULL,
    price_cents   BIGINT       NOT NULL,
    grant_id      BIGINT UNSIGNED NOT NULL,
    worker        VARCHAR(64)  NOT NULL,
    committed_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY ix_transfers_claim (claim_id)
  ) ENGINE=InnoDB`,
];

/** Faults the supervisor injected, written by it as they land: the verifier reads them from here. */
export const FAULT_TABLE = `CREATE TABLE demo_faults (
    id           INT UNSIGNED NOT NULL AUTO_INCREMENT,
    kind         VARCHAR(16)  NOT NULL,
    worker       VARCHAR(64)  NOT NULL,
    grant_id     BIGINT UNSIGNED NULL,
    loan_id      VARCHAR(32)  NULL,
    outcome      VARCHAR(64)  NOT NULL,
    detail       VARCHAR(255) NOT NULL DEFAULT '',
    PRIMARY KEY (id)
  ) ENGINE=InnoDB`;

export async function createLendingTables(db: Knex): Promise<void> {
  for (const ddl of [...LENDING_TABLES, FAULT_TABLE]) await db.raw(ddl);
}
