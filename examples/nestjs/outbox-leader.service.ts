import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import type { Knex } from 'knex';
import type { Campaign, LockManager, Term } from 'mysql-rwlock';
import { fromKnex } from 'mysql-rwlock/adapters';
import { LOCK_MANAGER } from 'mysql-rwlock/nestjs';
import { KNEX } from './database.module.js';

/**
 * Runs while this instance leads `outbox`: every instance campaigns once the app is up, one leads,
 * and each batch it relays commits only while its term leads. Nest calls onModuleDestroy before the
 * lock manager closes: the term ends there, and a waiting instance leads at once.
 */
@Injectable()
export class OutboxLeader implements OnApplicationBootstrap, OnModuleDestroy {
  #campaign: Campaign | undefined;

  constructor(
    @Inject(LOCK_MANAGER) private readonly locks: LockManager,
    @Inject(KNEX) private readonly db: Knex,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.#campaign = await this.locks.campaign('outbox', (term) => this.relay(term), { leaseMs: 10_000 });
  }

  async onModuleDestroy(): Promise<void> {
    await this.#campaign?.close();
  }

  /** The leader's work: a batch a second until the term ends. */
  private async relay(term: Term): Promise<void> {
    while (!term.signal.aborted) {
      await this.db
        .transaction(async (trx) => {
          await trx('outbox_relayed').insert({ term: term.id });
          await term.fence(fromKnex(trx)); // commits only while this term leads
        })
        .catch((err: unknown) => {
          if (!term.signal.aborted) throw err;
        });
      await sleep(1_000, undefined, { signal: term.signal }).catch(() => undefined); // ends with the term
    }
  }
}
