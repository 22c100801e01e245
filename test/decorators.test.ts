// @WithWriteLock / @WithReadLock compiled as TypeScript 5+ standard decorators (vitest.config.ts
// has TypeScript compile this file); test/legacy-decorators/ runs the same cases under
// experimentalDecorators. Also: current() outside and inside nested scoped calls, and the
// decorators' refusal of bad options when the class is defined.
// covers: src/decorators/index.ts, src/lock/manager/scoped-calls.ts, src/lock/manager/operator-calls.ts
import { describe, expect, it } from 'vitest';
import { createLockManager, InvalidOptionsError, type LockManager } from '../src/index.js';
import { registerLockManager, WithReadLock, WithWriteLock } from '../src/decorators/index.js';
import { fromKnex } from '../src/adapters/index.js';
import { useTestDatabase } from './support/db.js';
import { grantRow } from './support/state.js';
import {
  balanceBody,
  decoratorCases,
  failBody,
  repayBody,
  touchBody,
  type LoanService,
  type LoanServiceState,
  type RegisteredService,
} from './support/decorated.js';

const db = useTestDatabase(import.meta.filename);

let observed = 'none';
function probe(_value: unknown, context: unknown): void {
  observed = typeof context === 'object' && context !== null && 'kind' in context ? 'standard' : 'legacy';
}

const byLoan = (loanId: string) => `loan:${loanId}`;

class Loans implements LoanService {
  readonly locks;
  readonly db;
  readonly name;
  readonly events;
  constructor(state: LoanServiceState) {
    ({ locks: this.locks, db: this.db, name: this.name, events: this.events } = state);
  }

  @probe
  @WithWriteLock(byLoan, { manager: (self: Loans) => self.locks, waitMs: 60_000 })
  async repay(loanId: string, cents: number, hold?: Promise<void>): Promise<number | undefined> {
    return repayBody(this, loanId, cents, hold);
  }

  async repayUnlocked(loanId: string, cents: number, hold?: Promise<void>): Promise<number | undefined> {
    return repayBody(this, loanId, cents, hold);
  }

  @WithReadLock(byLoan, { manager: (self: Loans) => self.locks, waitMs: 60_000 })
  async balance(loanId: string, hold?: Promise<void>): Promise<number> {
    return balanceBody(this, loanId, hold);
  }

  @WithWriteLock(byLoan, { manager: (self: Loans) => self.locks })
  async failRepay(loanId: string): Promise<never> {
    return failBody(this, loanId);
  }
}

class Registered implements RegisteredService {
  @WithWriteLock(byLoan)
  async touch(loanId: string, locks: LockManager): Promise<string | undefined> {
    return touchBody(loanId, locks);
  }
}

class Member implements RegisteredService {
  constructor(private readonly locks: LockManager) {}

  @WithWriteLock(byLoan)
  async touch(loanId: string, locks: LockManager): Promise<string | undefined> {
    return this.locks === locks ? touchBody(loanId, locks) : undefined;
  }
}

decoratorCases({
  flavour: 'standard',
  observedFlavour: () => observed,
  db,
  service: (state) => new Loans(state),
  registered: () => new Registered(),
  member: (locks) => new Member(locks),
});

describe('current()', () => {
  it('is undefined outside a scoped call; inside nested ones, the innermost, or the one on a resource', async () => {
    const locks = createLockManager({ knex: db.knex });
    expect(locks.current()).toBeUndefined();
    expect(locks.current('outer')).toBeUndefined();
    await locks.withWriteLock('outer', async (outerTrx, outerGrant) => {
      expect(locks.current()).toEqual({ grant: outerGrant, trx: outerTrx });
      await locks.withReadLock('inner', async (innerTrx, innerGrant) => {
        expect(locks.current()).toEqual({ grant: innerGrant, trx: innerTrx });
        expect(locks.current('inner')?.grant).toBe(innerGrant);
        expect(locks.current('outer')).toEqual({ grant: outerGrant, trx: outerTrx });
        expect(locks.current('elsewhere')).toBeUndefined();
        // Scopes belong to their manager: another manager sees none here.
        expect(createLockManager({ knex: db.knex }).current()).toBeUndefined();
      });
      expect(locks.current()?.grant).toBe(outerGrant);
    });
    expect(locks.current()).toBeUndefined();
  });
});

describe('{ grant: true }: the method runs its own transaction under withWriteGrant', () => {
  it('the body reaches the grant with current(), fences its own transaction, and the commit releases the grant', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS granted_notes (loan VARCHAR(32)) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex });
    class Notes {
      grantId = 0;
      @WithWriteLock(byLoan, { manager: locks, grant: true, waitMs: 5_000 })
      async note(loanId: string): Promise<string> {
        const scope = locks.current(byLoan(loanId))!;
        this.grantId = scope.grant.id;
        expect(scope.trx).toBeUndefined(); // the transaction is the body's own
        await db.knex.transaction(async (trx) => {
          await trx('granted_notes').insert({ loan: loanId });
          await scope.grant.fence(fromKnex(trx));
        });
        return 'noted';
      }
    }
    const notes = new Notes();
    expect(await notes.note('G1')).toBe('noted');
    expect(await db.knex('granted_notes').where({ loan: 'G1' }).count({ n: '*' })).toEqual([{ n: 1 }]);
    expect(await grantRow(db.knex, notes.grantId)).toMatchObject({ status: 2, released_by: 1 });
    expect(await locks.tryAcquireWrite(byLoan('G1'))).not.toBeNull();
  });

  it('refuses isolationLevel with grant: true, and a grant that is not a boolean, when the class is defined', () => {
    // The type refuses it too (GrantDecoratorOptions has no isolationLevel); `as never` shows the run-time check.
    expect(() => WithWriteLock(byLoan, { grant: true, isolationLevel: 'serializable' } as never)).toThrow(
      InvalidOptionsError,
    );
    expect(() => WithReadLock(byLoan, { grant: 'yes' } as never)).toThrow(InvalidOptionsError);
    // Negative control: the same isolationLevel without grant is accepted.
    expect(() => WithWriteLock(byLoan, { isolationLevel: 'serializable' })).not.toThrow();
  });
});

describe('{ section: true }: the options of withWriteLock, all of them', () => {
  it('the method runs as a one-commit section: its writes commit, history marks it a section', async () => {
    await db.knex.raw('CREATE TABLE IF NOT EXISTS section_notes (loan VARCHAR(32)) ENGINE=InnoDB');
    const locks = createLockManager({ knex: db.knex });
    class Notes {
      @WithWriteLock(byLoan, { manager: locks, section: true, waitMs: 5_000 })
      async note(loanId: string): Promise<string> {
        await locks.current(byLoan(loanId))!.trx!('section_notes').insert({ loan: loanId });
        return 'noted';
      }
    }
    expect(await new Notes().note('S1')).toBe('noted');
    expect(await db.knex('section_notes').where({ loan: 'S1' }).count({ n: '*' })).toEqual([{ n: 1 }]);
    const { grants } = await locks.history(byLoan('S1'));
    expect(grants.map((g) => [g.mode, g.releasedBy])).toEqual([['write', 'section']]);
    // As withWriteLock refuses them: a section with grant: true, or with leaseMs.
    expect(() => WithWriteLock(byLoan, { grant: true, section: true } as never)).toThrow(InvalidOptionsError);
    expect(() => WithWriteLock(byLoan, { section: true, leaseMs: 1_000 })).toThrow(
      /leaseMs cannot be used with section/,
    );
  });
});

describe('decorator options', () => {
  it('refuses unknown keys, null, a bad manager and a keyOf that is not a function when the class is defined', () => {
    expect(() => WithWriteLock(byLoan, { waitMs: 1, wait: 5 } as never)).toThrow(InvalidOptionsError);
    expect(() => WithReadLock(byLoan, { waitMs: null } as never)).toThrow(InvalidOptionsError);
    expect(() => WithWriteLock(byLoan, { manager: 'locks' } as never)).toThrow(InvalidOptionsError);
    expect(() => WithWriteLock(byLoan, { manager: {} as never })).toThrow(InvalidOptionsError);
    expect(() => WithWriteLock('loan' as never)).toThrow(InvalidOptionsError);
    expect(() => registerLockManager({} as never)).toThrow(InvalidOptionsError);
  });

  it('refuses a manager function that returns no LockManager, at the call, with nothing written', async () => {
    class Lost {
      @WithWriteLock(byLoan, { manager: () => undefined as unknown as LockManager })
      async touch(_loanId: string): Promise<string> {
        return 'ran';
      }
    }
    const grants = async () => Number(((await db.knex('t_lock_log').count({ n: '*' })) as Array<{ n: number }>)[0]!.n);
    const before = await grants();
    await expect(new Lost().touch('L0')).rejects.toThrow(InvalidOptionsError);
    expect(await grants()).toBe(before);
  });
});
