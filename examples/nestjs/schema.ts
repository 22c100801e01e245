import type { Knex } from 'knex';

/** The example's tables: loans, the transfers of their claims, and an audit of the services' calls. */
export async function createLoanTables(db: Knex): Promise<void> {
  await db.raw('CREATE TABLE IF NOT EXISTS loan (id VARCHAR(32) PRIMARY KEY, balance_cents BIGINT NOT NULL)');
  await db.raw(`CREATE TABLE IF NOT EXISTS claim_transfer (
    id INT AUTO_INCREMENT PRIMARY KEY, loan_id VARCHAR(32) NOT NULL, investor VARCHAR(64) NOT NULL,
    balance_cents BIGINT NOT NULL)`);
  await db.raw(`CREATE TABLE IF NOT EXISTS loan_audit (
    id INT AUTO_INCREMENT PRIMARY KEY, loan_id VARCHAR(32) NOT NULL, event VARCHAR(16) NOT NULL)`);
}
