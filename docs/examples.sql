-- The business tables the examples of README.md and docs/*.md write, one definition each for every page, and
-- the rows they read. A block that creates a table itself (the quick start, docs/jobs.md, docs/semaphores.md)
-- creates it as written here. .ci/consumer-matrix.sh runs every page's ts blocks in one database made from this
-- file, and fails on a CREATE TABLE in a page that differs from the one here.
CREATE TABLE IF NOT EXISTS payments (
    id BIGINT AUTO_INCREMENT PRIMARY KEY,
    loan_id VARCHAR(64) NOT NULL,
    amount_cents BIGINT NOT NULL,
    grant_id BIGINT
  );
CREATE TABLE IF NOT EXISTS loans (id VARCHAR(64) PRIMARY KEY, repaid_cents BIGINT NOT NULL DEFAULT 0, state VARCHAR(16) NOT NULL DEFAULT 'open');
CREATE TABLE IF NOT EXISTS loan (id VARCHAR(32) PRIMARY KEY, balance_cents BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (id BIGINT AUTO_INCREMENT PRIMARY KEY, loan VARCHAR(64) NOT NULL);
CREATE TABLE IF NOT EXISTS invoice (id INT PRIMARY KEY, status VARCHAR(8) NOT NULL);
CREATE TABLE IF NOT EXISTS account (id INT PRIMARY KEY, balance BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, account INT NOT NULL, amount BIGINT NOT NULL, grant_id BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS stock (sku INT PRIMARY KEY, count INT NOT NULL);
CREATE TABLE IF NOT EXISTS stock_moves (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku INT NOT NULL, delta INT NOT NULL, grant_id BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS report_run (id BIGINT AUTO_INCREMENT PRIMARY KEY, started_at DATETIME(3) NOT NULL);
CREATE TABLE IF NOT EXISTS exports (
    id BIGINT AUTO_INCREMENT PRIMARY KEY,
    tenant VARCHAR(64) NOT NULL,
    grant_id BIGINT NOT NULL
  );
CREATE TABLE IF NOT EXISTS leader_ticks (
  id BIGINT AUTO_INCREMENT PRIMARY KEY,
  term BIGINT NOT NULL,
  owner VARCHAR(255) NOT NULL
);
INSERT IGNORE INTO loan (id, balance_cents) VALUES ('loan-1', 100000), ('loan-2', 100000), ('loan-7', 100000);
INSERT IGNORE INTO loans (id) VALUES ('loan-42');
INSERT IGNORE INTO invoice (id, status) VALUES (42, 'due');
INSERT IGNORE INTO account (id, balance) VALUES (7, 1000);
INSERT IGNORE INTO stock (sku, count) VALUES (42, 10);
