// The inventory case: one stock row, decremented one unit per sale, and one row per sale.
// qty is signed so an oversell shows as a negative stock instead of an error.
import type { Knex } from 'knex';

export const SKU = 'sku-1';

export async function createStockTables(db: Knex, units: number): Promise<void> {
  await db.raw(`CREATE TABLE stock (
    sku          VARCHAR(32) NOT NULL,
    initial_qty  INT NOT NULL,
    qty          INT NOT NULL,
    PRIMARY KEY (sku)
  ) ENGINE=InnoDB`);
  await db.raw(`CREATE TABLE deductions (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    sku          VARCHAR(32) NOT NULL,
    grant_id     BIGINT UNSIGNED NOT NULL,
    worker       VARCHAR(64) NOT NULL,
    qty_before   INT NOT NULL,
    qty_after    INT NOT NULL,
    committed_at DATETIME(6) NOT NULL,
    PRIMARY KEY (id)
  ) ENGINE=InnoDB`);
  await db('stock').insert({ sku: SKU, initial_qty: units, qty: units });
}
