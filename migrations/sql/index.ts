// The released migrations' frozen texts, in the order they run, each pinned by the SHA-256 of its text
// when it was frozen: written by scripts/migrations.ts (`npm run migration:new`), never by hand.
import { TEXT as t001 } from './001_lock_tables.js';
import { TEXT as t002 } from './002_acquire_v2.js';
import { TEXT as t003 } from './003_mode_changes.js';
import { TEXT as t004 } from './004_release_notes.js';
import { TEXT as t005 } from './005_history_index.js';
import { TEXT as t006 } from './006_invoker_routines.js';
import { TEXT as t007 } from './007_utc_times.js';
import { TEXT as t008 } from './008_resource_gate.js';
import { TEXT as t009 } from './009_section_take.js';
import { TEXT as t010 } from './010_permits.js';
import { TEXT as t011 } from './011_group_acquire.js';
import { TEXT as t012 } from './012_section_begin.js';
import { TEXT as t013 } from './013_section_one_target.js';
import { TEXT as t014 } from './014_section_history_choice.js';
import { TEXT as t015 } from './015_fence_commit.js';
import { TEXT as t016 } from './016_writer_intent_gate.js';

export const RELEASED: readonly { name: string; text: string; sha256: string }[] = [
  { name: '001_lock_tables', text: t001, sha256: '1435fc622411aeecb25826809712c269d1d45b005dc5e4007d465c7f0a6c2edc' },
  { name: '002_acquire_v2', text: t002, sha256: '8b01e50831b41698c6c7fb3935973fc37104ffe69cf9295d6567254248842ea1' },
  { name: '003_mode_changes', text: t003, sha256: '72cbd468c67754705046e6fb16f8a6518113b61dcfee6bee08b7c5849684f7aa' },
  { name: '004_release_notes', text: t004, sha256: '942c4c567e54373c118b811ac1aa2f9bfad5f4bf3d0a9f7cc4de0b3210bbed76' },
  { name: '005_history_index', text: t005, sha256: '1df0d6a77e0209cbffadc99c2310801c5e23612d6734c16edd373e1cff924a3b' },
  {
    name: '006_invoker_routines',
    text: t006,
    sha256: '056b805df82e852e8ba6e683e4a5e3cdd6933e7fa6f62afc18b61420eb501423',
  },
  { name: '007_utc_times', text: t007, sha256: '8cb3bcb0dfe5838100bbaf2407294aba76f705122be6892f7e9fe0d4d965e70c' },
  { name: '008_resource_gate', text: t008, sha256: 'af9c445a62e1f7cd8f2fa178869c9c9a06be438673c46a67b555a17bc3fa5441' },
  { name: '009_section_take', text: t009, sha256: '4e3e870a077afa13c3c4a358f7c65d4949099caaae8e05028a9d6b4ae5ef14a4' },
  { name: '010_permits', text: t010, sha256: '420ecd2ee61a75f225ad3a035cbd046baad5d04547fe93a371fe0cb029efc1e1' },
  { name: '011_group_acquire', text: t011, sha256: '5844a5361c101c83285cd74f7d555125f1509e45a9821b24f92bb7aa4498e1d0' },
  { name: '012_section_begin', text: t012, sha256: 'da0c38e8f39bb3851e9751ec3593929bd5a101f2e34355afd7e80e6308fbb0d1' },
  {
    name: '013_section_one_target',
    text: t013,
    sha256: '4faa963613b9ba464a8b01ab8b06bbf678d4fb6c5fc668f93e457b7122e5de97',
  },
  {
    name: '014_section_history_choice',
    text: t014,
    sha256: '850a1a3be27fcc337693364fe927ab7b05f4566f710c640327be7e0c1cc1fe15',
  },
  { name: '015_fence_commit', text: t015, sha256: 'ed1f5504d6d04badfee57469f4a5a59018a11985a7cc873bd9317b1cd323af04' },
  {
    name: '016_writer_intent_gate',
    text: t016,
    sha256: 'aa702b26998a03b523da9a488fb64b53d60a456f752e417c2106595f798a36be',
  },
];
