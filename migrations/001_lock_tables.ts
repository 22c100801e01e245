import { frozen } from './index.js';

/**
 * Version 1 of the lock schema. The DDL lives here once; `npm run schema:sql` writes the same
 * statements to sql/schema.sql for teams that apply migrations with their own tool, and a test
 * applies both and compares what they create.
 *
 * - resource_id is VARBINARY: byte comparison, so ids that differ in case or trailing spaces are
 *   different locks (a PAD SPACE collation would merge 'a' and 'a ').
 * - Times are DATETIME(6) from the database clock (NOW(6)); clients never send a time.
 * - (status, create_time) lets the reaper find stale live grants without scanning the log, and
 *   inspect() find a resource's live grants among the live ones. No index on resource_id alone
 *   here: migration 005 added one for history(), once measured to cost a grant nothing visible.
 * - lease_until, set by Grant.extend(), keeps a long-running holder from being reaped until then.
 * - token is client-generated before the acquire, so a commit whose reply was lost can be looked up.
 * - The procedures make an acquire and a release one round trip and one commit each.
 *
 * Its DDL is frozen in migrations/sql/001_lock_tables.ts; this module gives it the names it had.
 */
export const { TABLES, INDEXES, PROCEDURES, up, down } = frozen('001_lock_tables');
