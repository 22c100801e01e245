// How a section decides, from the server's variables, whether reading sections may share through a
// shared row lock (src/sql/section.ts): only where every member that can write sees the lock.
// covers: src/sql/section.ts
import { describe, expect, it } from 'vitest';
import { sectionServerOf } from '../../src/sql/section.js';

const vars = (entries: Record<string, string>) => new Map(Object.entries(entries));

describe('sectionServerOf', () => {
  it('a single server shares reads; MariaDB is told by its version string', () => {
    expect(sectionServerOf('10.11.6-MariaDB-log', vars({}))).toEqual({
      mariadb: true,
      topology: 'single',
      sharedLocksCertified: true,
    });
    expect(sectionServerOf('9.7.4', vars({ wsrep_on: 'OFF' }))).toMatchObject({ mariadb: false, topology: 'single' });
  });

  it('Galera and Group Replication multi-primary take reading sections as writers do', () => {
    expect(sectionServerOf('11.8.2-MariaDB', vars({ wsrep_on: 'ON' }))).toMatchObject({
      topology: 'galera',
      sharedLocksCertified: false,
    });
    expect(
      sectionServerOf(
        '9.7.4',
        vars({ group_replication_single_primary_mode: 'OFF', group_replication_group_name: 'aaaaaaaa-bbbb' }),
      ),
    ).toMatchObject({ topology: 'group-replication-multi-primary', sharedLocksCertified: false });
  });

  it('Group Replication single-primary shares reads; a loaded plugin with no group is a single server', () => {
    expect(
      sectionServerOf(
        '9.7.4',
        vars({ group_replication_single_primary_mode: 'ON', group_replication_group_name: 'aaaaaaaa-bbbb' }),
      ),
    ).toMatchObject({ topology: 'group-replication-single-primary', sharedLocksCertified: true });
    expect(
      sectionServerOf(
        '9.7.4',
        vars({ group_replication_single_primary_mode: 'OFF', group_replication_group_name: '' }),
      ),
    ).toMatchObject({ topology: 'single', sharedLocksCertified: true });
  });
});
