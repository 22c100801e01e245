/*
 * mysql-rwlock's lock protocol, for Spin. docs/model.md maps every step below to the
 * statement or transaction of the library that it abstracts, and docs/model-runs.md says what is bounded and why.
 *
 * One atomic step (d_step) is one statement or one transaction of the real code: every transaction
 * of the lock locks the rows it decides on (a guarded UPDATE or a locking read) and holds those locks
 * to its commit, so its effect is that of running alone at its commit point. Every state between
 * steps is therefore a commit boundary, and CHECK() runs at the end of every writing step. The
 * exceptions hold row locks across steps, and the model holds those locks explicitly: a one-commit
 * section (its gate and lock rows, from its take to its commit or rollback) and a business transaction
 * whose COMMIT was sent and may still be in flight (the rows its fence locked).
 *
 * Configuration (spin -D...):
 *   NC      clients (2 or 3)              NACQ   lock cycles per client
 *   NLOST   lost replies in the whole run NOFAILOVER  no asynchronous failover
 *   SECTIONS  clients may run one-commit sections as well as durable grants
 *   BARE      (with SECTIONS) a section may run without history (`history: false`): its commit
 *             writes no log row, and a COMMIT whose reply was lost is reported unknown
 *             (LockOutcomeUnknownError), as there is no row to settle it by
 *   GROUPS    clients may lock both resources as one group (durable, or a section group)
 *   PURGE     the retention purge runs        REPAIR  an operator runs repairLockCounts once
 *   MODE_LOST a mode change's reply may be lost   GRANT_FORM  withWriteGrant's settling
 *   WITNESS_SHARE  assert that a durable reader is never granted beside a read section: its
 *                  counterexample is the witness that readers share across modes
 *   GROUPS_ONLY  every cycle is a group (durable or section)
 *   SECTION_GROUPS_ONLY  every cycle is a section group (the progress run of groups)
 *   ONLY_LOST_ACQUIRE, ONLY_LOST_COMMIT  only that reply may be lost (for a control aimed at its settle)
 *   NO_LOST_GRANT_REPLY  no lost reply of a durable acquire, commit or release (runs aimed elsewhere)
 *   HEAL      a refused durable acquire (single or a group's take) may heal its resource: the
 *             reaper's select and guarded, versioned release, NOWAIT, inside the acquire's call
 *   NO_REAPER  no reaper process: stale grants are released only by heals (and the operator)
 *   LONG_CUTOFF  every lease is shorter than the cutoff, which no grant reaches in a run: a grant goes
 *             stale only when its lease (set by extend(): leaseMs, lockAtMostFor, ttlMs) runs out, as
 *             a renewer that paused or died lets it
 *   LIVENESS  compile the ltl formulas (progress runs)
 *   PERMITS   every cycle is a durable permit of a semaphore of LIMIT (default 2) on resource 0: the
 *             read grant whose guarded UPDATE also needs r_count < LIMIT (migration 010); no mode
 *             change, no sections or groups. CHECK asserts no more than LIMIT live permits.
 *   WITNESS_PERMITS  (with PERMITS) assert that fewer than LIMIT permits are ever held: its
 *                  counterexample is the witness that LIMIT holders do hold at once
 *   KINDS     every cycle is a durable acquire of resource 0 as a write lock, a read lock, or a permit
 *             of a semaphore of 1 or of 2 (the lock row's permit_limit), with self-healing (HEAL):
 *             an attempt refused by the other kind or another limit heals the resource first and is
 *             decided again; the refusal (ResourceKindError, PermitLimitError) stands only while a
 *             holder that is not a crashed one's stale grant disagrees. No mode change (see
 *             KINDS_DOWNGRADE), sections or groups; NC <= 3, NACQ = 1, no lost replies.
 *   WITNESS_HEALED  (with KINDS) assert that a call refused by the other kind or limit is never
 *                  granted: its counterexample is the witness that healing frees the resource
 *   LEADER    campaigners instead of clients (src/lock/leader): each loops, up to NACQ terms, over
 *             the name's write grant (waiting; a refused attempt may heal), its lease's first
 *             extension, then up to NLEAD steps of leading (renewals, business transactions fenced
 *             by TERM_FENCE_SQL, which holds the term's grant row to its COMMIT), and the term's end:
 *             a release (resign, close, failed, expired) or a crash. Asserts that terms' business
 *             commits come in the order of the terms, and that a campaigner leads again only with a
 *             higher term.
 *   JOBS      job instances instead of clients (src/lock/scheduled/exclusive.ts, lockAtLeastFor):
 *             each fire tries the job's write grant once (a try may heal), leases it, and runs its
 *             transaction, whose last statements hand the hold over to a successor grant
 *             (src/sql/hand-over.ts) in the run's commit; the successor is released once the
 *             window has passed. Its commit's reply may be lost (NLOST), the instance may crash
 *             anywhere. Asserts that no run commits while an earlier run's lockAtLeastFor window
 *             is open.
 * Negative controls, each a defect of the reference design, of an earlier version, or one the design
 * avoids:
 *   NO_RESOURCE_ID     the acquire UPDATE lacks resource_id = ?: any row that passes the guard grants
 *   PRECHECK           a SELECT decides; the acquire's UPDATE that follows is not guarded
 *   UNVERSIONED_REAPER versions never change and the reaper's write is guarded by version alone
 *   RELEASE_AFTER_REAP a release gives the count back even when the grant row was no longer live
 *   CLIENT_CLOCK       the reaper judges staleness on its own clock, which runs ahead
 *   ID_ONLY            statements on a grant name it by id alone, not by id and token
 *   LOOKUP_SETTLE      a lost acquire is settled by looking its token up, not by the withdrawal insert
 *   INTENT_NO_EXPIRY   a writer's intent mark never expires (progress)
 *   LEASE_FOREVER      the reaper never reaps a grant once extended, even after its lease ran out (progress)
 *   LEASE_LENGTHENS    the former lease rule: a grant is stale only past the cutoff, its lease (if any) run
 *                      out, so a lease can lengthen a grant's life but never end it sooner (progress,
 *                      with LONG_CUTOFF: a leased grant whose renewer died is never released)
 *   SECTION_NO_GUARD   a write section's UPDATE of the lock row is not guarded by the counts
 *   GROUP_FIRST_FENCE  a group's fence checks only its first grant
 *   CALLER_ORDER       section groups take their rows in the caller's order, not the ids' (progress)
 *   READ_SECTION_TAKES_ROW  a read section share-locks the lock row (then a durable reader is busy)
 *   UPGRADE_NO_GATE    tryUpgrade changes the lock row without taking the gate
 *   PURGE_NO_FLOOR     the purge deletes any released row its retention selects
 *   LOOKUP_COMMIT_SETTLE  a lost COMMIT is settled by a non-locking look-up, its COMMIT still in flight
 *   REPAIR_COUNT_FIRST repairLockCounts counts the live grants before it locks the lock row
 *   GROUP_KEEPS        a group that times out keeps the grants it took (not all or nothing)
 *   GROUP_PARTIAL      the one-call group acquire commits its take of the first resource when the
 *                      second is refused (a grant nobody holds)
 *   HEAL_NO_GUARD      the heal releases the grant it read as stale without checking it again
 *                      (still stale, same version) under the row lock
 *   HEAL_AGE_ONLY      the heal judges a grant by its age alone, ignoring an extended lease
 *   NO_HEAL            no self-healing (selfHeal: false) where HEAL is asked for: with NO_REAPER,
 *                      nothing frees a crashed holder's resource (progress)
 *   PERMIT_PRECHECK    (with PERMITS) the limit is checked by a SELECT of the count before the acquire,
 *                      whose UPDATE then adds to the count without the limit in its guard
 *   REFUSE_BEFORE_HEAL (with KINDS) an attempt refused by the other kind or limit is refused at once,
 *                      without healing the resource first
 *   KINDS_DOWNGRADE    (with KINDS) a write lock may be downgraded: the statement clears the lock
 *                      row's permit_limit, as the read guard does, so the reader it leaves is a reader
 *   DOWNGRADE_KEEPS_LIMIT  (with KINDS_DOWNGRADE) the downgrade leaves permit_limit as the last
 *                      semaphore left it: the reader counts as a permit of that semaphore
 *   LEADER_UNFENCED    (with LEADER) a leader commits its business writes without the term's fence,
 *                      whenever it still believes it leads (its signal not yet seen)
 *   TERM_FENCE_UNLOCKED  (with LEADER) the term's fence checks the grant (live, its token, its lease)
 *                      without holding the row to the COMMIT (a plain SELECT)
 *   FENCE_COMMITS_REFUSED  the fence and the COMMIT in one call (migration 015) commit the business
 *                      writes even when the fence found the grant no longer live
 *   BARE_SETTLE        (with BARE) a section without history settles a lost COMMIT by its token, as
 *                      one with history does: it finds no row and reports "not committed"
 *   HAND_OVER_TWO_STEPS  (with JOBS) the hand-over as two transactions: the run's fence releases the
 *                      job's grant and commits, then the successor is taken by an acquire of its own
 */

#ifdef NO_HEAL
#undef HEAL
#endif

#ifdef PERMITS
#ifndef LIMIT
#define LIMIT 2
#endif
#endif

#ifndef NC
#define NC 2
#endif
#ifndef NACQ
#define NACQ 2
#endif
#ifndef NLOST
#define NLOST 1
#endif
/* A client's token counter moves on at each grant (a group takes two), at each lost acquire and by
   two at each section cycle (one row per resource it may lock): its tokens are distinct. NLOST bounds
   the lost replies. */
#if defined(SECTIONS) || defined(GROUPS) || defined(JOBS)
/* (a job's run takes two: its grant and its hand-over's successor) */
#define TPC (2 * NACQ + NLOST)
#else
#define TPC (NACQ + NLOST)
#endif
/* Grant log ids 1..NG-1: every grant, section row and withdrawal row takes one. */
#define NG (NC * TPC + 1)

#if (defined(KINDS) || defined(LEADER) || defined(JOBS)) && !defined(NOFAILOVER)
#error "KINDS, LEADER and JOBS are checked without the failover (-DNOFAILOVER)"
#endif
#if defined(KINDS) && (NG > 8 || NC > 3 || defined(PERMITS) || defined(SECTIONS) || defined(GROUPS))
#error "KINDS: durable acquires only, at most 3 clients and 7 grant ids (NACQ 1, NLOST 0)"
#endif
#if defined(KINDS) && !defined(HEAL)
#error "KINDS is the self-healing acquire's (-DHEAL)"
#endif

#define LIVE 1
#define RELEASED 2
/* released_by */
#define HOLDER 1
#define REAPER 2
#define OPERATOR 3
#define WITHDRAWN 4
#define SECTION 5

/* The two resources: durable and section cycles of one resource use resource 0; groups lock both. */
#define NRES 2
/* what the downgrade does to permit_limit (only the KINDS runs model it) */
#if defined(KINDS) && !defined(DOWNGRADE_KEEPS_LIMIT)
#define CLEAR_LIMIT(q) db.lim[q] = 0
#else
#define CLEAR_LIMIT(q) skip
#endif

typedef Row {
  byte tok;              /* 0: no row with this id */
  unsigned st : 2;       /* status: LIVE or RELEASED */
  bit wr;                /* lock_type: 1 write, 0 read */
  bit res;               /* resource_id */
  byte ver;              /* version */
  bit stale;             /* STALE_SQL on the database clock: its lease run out, or unleased past the cutoff */
#if defined(LEASE_FOREVER) || defined(LONG_CUTOFF) || defined(LEASE_LENGTHENS)
  bit ext;               /* lease_until IS NOT NULL */
#endif
#if defined(HEAL_AGE_ONLY) || defined(LEASE_LENGTHENS)
  bit old;               /* older than the cutoff, whatever its lease */
#endif
  unsigned by : 3;       /* released_by */
#ifdef KINDS
  unsigned pk : 2;       /* ghost: the kind it was granted as: 0 a read or write lock, else a permit of that limit */
#endif
  unsigned gb : 2        /* ghost: how many times this grant's count was given back */
}

typedef Db {
  Row g[NG];
  byte next;             /* AUTO_INCREMENT */
  bit ex[NRES];          /* the resource's lock row exists (created on first use) */
  byte wc[NRES];         /* its w_count */
  byte rc[NRES];         /* its r_count */
  bit intent[NRES];      /* w_wait_until > NOW(6) */
#ifdef KINDS
  byte lim[NRES];        /* permit_limit: 0 NULL, else the limit the last permit acquire wrote */
#endif
  byte biz[NC]           /* ghost business data: token of the grant each client's last business commit ran under */
}

Db db;                   /* the primary */
#ifndef NOFAILOVER
Db rep;                  /* an asynchronous replica: a prefix of the primary's commits */
bit failed;              /* the one failover has happened */
#endif

/*
 * InnoDB row locks held across steps, per resource: the gate row's shared holders and exclusive
 * holder (client + 1), and the lock row's exclusive holder (a write section, or a business
 * transaction whose fence ran and whose COMMIT is in flight). A durable acquire takes the gate NOWAIT
 * (a conflicting holder refuses the attempt) and then waits for the lock row (see CAN_ACQUIRE); every
 * other statement on the lock row waits for it.
 */
byte gs[NRES];
byte gx[NRES];
byte rx[NRES];
#ifdef READ_SECTION_TAKES_ROW
byte rs[NRES];           /* the lock row's shared holders (read sections of the old design) */
#endif
/* ghost: sections past their take, holding the resource, per mode */
byte secw[NRES];
byte secr[NRES];
#ifdef LEADER
/* the grant row that a term's fence locked, held to its transaction's COMMIT (its id; 0: none) */
byte fx;
/* ghost: the term (grant id) of the last business commit of any leader */
byte lastterm;
#endif
#ifdef JOBS
/* ghost: a committed run's lockAtLeastFor window is open (from its grant, on the database clock) */
bit keep;
/* ghost: the grant that holds the job through that window (the run's hand-over successor) */
byte kg;
#endif
#ifdef KINDS
/* ghost: the clients that crashed (bit per client): their live grants have no holder left */
byte dead;
#endif

#ifdef NOFAILOVER
#define EPOCH 0
#else
#define EPOCH failed
#endif
/* lost replies so far, all clients together */
byte lost;
/* ghost: per client, the token counters of attempts the client settled as never granted */
byte nogrant[NC];
/* ghost: per client, the token whose row an unfinished settling may still read (the purge's floor) */
byte win[NC];
#ifdef PURGE
#define SET_WIN(c, t) win[c] = (t)
#else
/* only the purge reads it: without it, a step that set it would only hide from partial-order reduction */
#define SET_WIN(c, t) skip
#endif
#ifdef LIVENESS
/* ghost: clients in a waiting acquire (for the progress property) */
byte waiting;
#define WAITING(c) waiting = waiting | (1 << (c))
#define NOT_WAITING(c) waiting = waiting & ~(1 << (c))
/* ghost: clients holding a gate of their section group while they wait for the next one */
byte gwait;
#else
#define WAITING(c) skip
#define NOT_WAITING(c) skip
#endif

hidden byte i, j, nw, nr, q, cw, cr;

#define TOK(c, k) ((c) * TPC + (k) + 1)
#define TOKCLIENT(t) (((t) - 1) / TPC)
#define TOKK(t) (((t) - 1) % TPC)

#ifdef UNVERSIONED_REAPER
#define BUMP(v) skip
#else
#define BUMP(v) v++
#endif

/*
 * A released row's version and age are never read again by a guarded statement (every one requires
 * status live first), so the model forgets them: release sets version + 1 in the real statement.
 */
#ifdef UNVERSIONED_REAPER
#define FORGET(id) skip
#else
#define FORGET(id) db.g[id].ver = 0; db.g[id].stale = 0
#endif

#ifdef ID_ONLY
#define NAMED(id, t) (db.g[id].tok != 0)
#else
#define NAMED(id, t) (db.g[id].tok == (t))
#endif

#ifdef CLIENT_CLOCK
/* The reaper's clock runs far ahead of the database's: every grant looks old, every lease run out. */
#define REAPER_STALE(id) (1)
#elif defined(LEASE_FOREVER)
#define REAPER_STALE(id) (db.g[id].stale && !db.g[id].ext)
#elif defined(LEASE_LENGTHENS)
/* the former rule: a leased grant whose lease ran out is stale only once it is past the cutoff too */
#define REAPER_STALE(id) (db.g[id].stale && (!db.g[id].ext || db.g[id].old))
#else
#define REAPER_STALE(id) (db.g[id].stale)
#endif
#define STALE(id) (db.g[id].st == LIVE && db.g[id].stale)
#ifdef HEAL_AGE_ONLY
#define HEAL_STALE(id) (db.g[id].old)
#else
#define HEAL_STALE(id) REAPER_STALE(id)
#endif
#if (defined(HEAL_AGE_ONLY) || defined(LEASE_LENGTHENS)) && !defined(LONG_CUTOFF)
#define SET_OLD(id) db.g[id].old = 1
#else
#define SET_OLD(id) skip
#endif
#if defined(HEAL_AGE_ONLY) || defined(LEASE_LENGTHENS)
#define COPY_OLD(to, from, j) to.g[j].old = from.g[j].old
#else
#define COPY_OLD(to, from, j) skip
#endif
#if defined(LEASE_FOREVER) || defined(LONG_CUTOFF) || defined(LEASE_LENGTHENS)
#define SET_EXT(id) db.g[id].ext = 1
#define COPY_EXT(to, from, j) to.g[j].ext = from.g[j].ext
#else
#define SET_EXT(id) skip
#define COPY_EXT(to, from, j) skip
#endif

/*
 * A durable acquire takes the resource's gate NOWAIT, a writer exclusively and a reader shared: a
 * gate held in a conflicting mode (a section: write exclusive, read shared) refuses the attempt at
 * once (a reader's few re-tries within COLLISION_PAUSES_MS are refused attempts tried again, which
 * any client may do). With the gate, its guarded UPDATE of the lock row waits for a transaction that
 * holds that row without a gate (a COMMIT in flight; READ_SECTION_TAKES_ROW: a read section's shared
 * lock): the acquire's step runs only once the row is free (CAN_ACQUIRE). A wait given up (its
 * deadline, its signal, the server's lock wait timeout) changed nothing: the same as never sent.
 */
#define GATE_BUSY(w, res) ((w) -> (gs[res] != 0 || gx[res] != 0) : (gx[res] != 0))
#ifdef READ_SECTION_TAKES_ROW
#define ROW_HELD(res) (rx[res] != 0 || rs[res] != 0)
#else
#define ROW_HELD(res) (rx[res] != 0)
#endif
#define CAN_ACQUIRE(w, res) (GATE_BUSY(w, res) || !ROW_HELD(res))
/* A writer's take of res in the one-call group acquire: ACQUIRE's gate and guard (write) would grant it. */
#define GROUP_FREE(res) (!GATE_BUSY(1, res) && (!db.ex[res] || (db.wc[res] == 0 && db.rc[res] == 0)))
#if NC == 3
#define IN_WINDOW(t) (win[0] == (t) || win[1] == (t) || win[2] == (t))
#else
#define IN_WINDOW(t) (win[0] == (t) || win[1] == (t))
#endif
/*
 * The rows a settle may still need: the purge's floor keeps them (PURGE_NO_FLOOR: no floor). The
 * floor is a time (LIMITS.purgeFloorMs) longer than any settling's window; docs/lost-replies.md says why.
 */
#ifdef PURGE_NO_FLOOR
#define NEEDED(t) (0)
#else
#define NEEDED(t) IN_WINDOW(t)
#endif

/* Every property that must hold at every commit. */
inline CHECK() {
  q = 0;
  do
  :: q < NRES ->
     cw = 0; cr = 0; i = 1;
     do
     :: i < NG ->
        if
        :: db.g[i].st == LIVE && db.g[i].res == q -> if :: db.g[i].wr -> cw++ :: else -> cr++ fi
        :: else
        fi;
#ifdef KINDS
        /* kinds never mix: every live shared grant is of the kind (and limit) the lock row says */
        assert(!(db.g[i].st == LIVE && db.g[i].res == q && !db.g[i].wr) || db.g[i].pk == db.lim[q]);
#endif
        i++
     :: else -> break
     od;
     /* mutual exclusion over live grants and sections holding: a writer alone, readers only with readers */
     nw = cw + secw[q]; nr = cr + secr[q];
     assert(nw <= 1 && (nw == 0 || nr == 0));
     /* the counts equal the live grants */
     assert(db.wc[q] == cw && db.rc[q] == cr);
#ifdef PERMITS
     /* never more than LIMIT holders of the semaphore */
     assert(cr <= LIMIT);
#ifdef WITNESS_PERMITS
     /* fails exactly when LIMIT permits are held at once: the semaphore admits up to its limit */
     assert(cr < LIMIT);
#endif
#endif
#ifdef KINDS
     /* never more permits than the semaphore's limit */
     assert(db.lim[q] == 0 || cr <= db.lim[q]);
#endif
     q++
  :: else -> break
  od;
  i = 1;
  do
  :: i < NG ->
     /* a count is never given back twice */
     assert(db.g[i].gb <= 1);
     /* an acquire whose reply was lost and that its caller settled as never granted never is */
     assert(db.g[i].tok == 0 || db.g[i].by == WITHDRAWN || db.g[i].by == SECTION || ((nogrant[TOKCLIENT(db.g[i].tok)] >> TOKK(db.g[i].tok)) & 1) == 0);
     i++
  :: else -> break
  od;
  nw = 0; nr = 0; i = 0; q = 0; cw = 0; cr = 0
}

/* Gives a grant's counts back; a count that would go below zero fails the statement (1690). */
inline GIVE_BACK(id, ok) {
  if
  :: db.g[id].wr && db.wc[db.g[id].res] >= 1 -> db.wc[db.g[id].res]--; db.g[id].gb++
  :: !db.g[id].wr && db.rc[db.g[id].res] >= 1 -> db.rc[db.g[id].res]--; db.g[id].gb++
  :: else -> ok = 0
  fi
}

/* A new row at the next id (AUTO_INCREMENT). */
inline NEW_ROW(tk, status, w, rs_, who) {
  assert(db.next < NG);
  db.g[db.next].tok = tk; db.g[db.next].st = status; db.g[db.next].wr = w; db.g[db.next].res = rs_;
  db.g[db.next].ver = 0; db.g[db.next].stale = 0; db.g[db.next].by = who; db.g[db.next].gb = 0;
#ifdef KINDS
  db.g[db.next].pk = 0;
#endif
#ifdef HEAL_AGE_ONLY
  db.g[db.next].old = 0;
#endif
  db.next++
}

/* The row under token tk, or NG: the token's UNIQUE key. */
inline FIND(tk, at) {
  at = 1;
  do
  :: at < NG && db.g[at].tok == tk -> break
  :: at < NG && db.g[at].tok != tk -> at++
  :: else -> break
  od
}

/*
 * The acquire of resource res: procedure rwlock_acquire, or the same transaction as plain
 * statements. tk: the attempt's token; mark: a waiting writer's intent mark. id: the new grant's id,
 * or 0. Its gate is taken NOWAIT (GATE_BUSY: a refusal); the step runs only when CAN_ACQUIRE holds,
 * so with the gate taken the lock row is free.
 */
inline ACQUIRE(tk, w, mark, id, res) {
  id = 0;
  /* the grant row's INSERT fails on a duplicate token and rolls the whole transaction back */
  FIND(tk, i);
  /* nw: granted; nr: how the lock row changes (1 first use, 2 the guarded UPDATE); j: the other row changes */
  nw = 0; nr = 0; j = 0;
  if
  :: GATE_BUSY(w, res) -> skip
  :: else ->
     assert(!ROW_HELD(res));
     if
     :: !db.ex[res] -> nr = 1
#ifdef PRECHECK
     /* the SELECT before decided (see the client); the UPDATE is not guarded */
     :: db.ex[res] -> nr = 2
#elif defined(PERMIT_PRECHECK)
     /* the client's SELECT of the count decided; the UPDATE adds a permit with no limit in its guard */
     :: db.ex[res] && !w && db.wc[res] == 0 -> nr = 2
#elif defined(PERMITS)
     /* rwlock_acquire_permit's guard: no writer, and room for one more under the limit */
     :: db.ex[res] && !w && db.wc[res] == 0 && db.rc[res] < LIMIT -> nr = 2
#else
     :: db.ex[res] && w && db.wc[res] == 0 && db.rc[res] == 0 -> nr = 2
     :: db.ex[res] && !w && db.wc[res] == 0 && !db.intent[res] -> nr = 2
#endif
     :: else
     fi;
#ifdef NO_RESOURCE_ID
     /* no resource_id = ? in the WHERE clause: every row passing the guard changes */
     if
     :: w && db.wc[1 - res] == 0 && db.rc[1 - res] == 0 -> j = 1
     :: !w && db.wc[1 - res] == 0 -> j = 1
     :: else
     fi;
#endif
     skip
  fi;
  nw = (nr != 0 || j != 0);
  if
  :: nw && i < NG -> skip   /* rolled back: nothing changes */
  :: nw && i == NG ->
     if
     :: nr == 1 -> db.ex[res] = 1; if :: w -> db.wc[res] = 1 :: else -> db.rc[res] = 1 fi
     :: nr == 2 && w -> db.wc[res] = 1; db.intent[res] = 0
     :: nr == 2 && !w -> db.rc[res]++
     :: else
     fi;
     if :: j && w -> db.wc[1 - res] = 1 :: j && !w -> db.rc[1 - res]++ :: else fi;
     id = db.next;
     NEW_ROW(tk, LIVE, w, res, 0)
  :: else ->
     if :: db.ex[res] && w && mark && rx[res] == 0 -> db.intent[res] = 1 :: else fi
  fi;
  i = 0; j = 0; nw = 0; nr = 0
}

/*
 * RELEASE_SQL: the grant row leaves live and its count is given back, both or neither. ok: 1 when
 * it released. Used alone (release, the settling of a lost reply), as the fence, and by an operator.
 * Callers run it only while no one else holds the lock row (it waits for that lock).
 */
inline RELEASE(id, tk, w, who, ok) {
  ok = 0;
  if
  :: id != 0 && NAMED(id, tk) && db.g[id].wr == w && db.g[id].st == LIVE ->
     ok = 1; GIVE_BACK(id, ok);
     if
     :: ok -> db.g[id].st = RELEASED; db.g[id].by = who; FORGET(id)
     :: else
     fi
  :: else ->
#ifdef RELEASE_AFTER_REAP
     /* the reference: the count is given back whatever the grant row says */
     if :: id != 0 && NAMED(id, tk) && db.g[id].wr == w -> GIVE_BACK(id, nw); nw = 0 :: else fi
#else
     skip
#endif
  fi
}
/* The lock row of grant id is not locked by another transaction (a statement on it waits until then). */
#ifdef LEADER
/* nor its grant row, which a term's fence holds to its COMMIT: every release is a write of that row */
#define ROW_FREE(id) (rx[db.g[id].res] == 0 && fx != (id))
#else
#define ROW_FREE(id) (rx[db.g[id].res] == 0)
#endif

/* The fence: the business transaction's last statement; its writes commit only with the release. */
inline FENCE(c, id, tk, w, ok) {
  RELEASE(id, tk, w, HOLDER, ok);
  if
  :: ok ->
     /* the business effect commits only under the caller's own live grant */
     assert(db.g[id].tok == tk);
     db.biz[c] = tk
#ifdef FENCE_COMMITS_REFUSED
  :: else -> db.biz[c] = tk   /* the defect: the fence-and-commit call commits what its fence refused */
#else
  :: else
#endif
  fi;
  /* a refused fence commits nothing: rolled back with the business writes (rwlock_fence_commit too) */
  assert(ok || db.biz[c] != tk)
}

#ifdef READ_SECTION_TAKES_ROW
#define RS_UP(res) rs[res]++
#define RS_DOWN(res) rs[res]--
#else
#define RS_UP(res) skip
#define RS_DOWN(res) skip
#endif

/*
 * A section's take of resource res, once it holds the resource's gate (write: exclusive, read:
 * shared). Write: the guarded UPDATE of the lock row, which it then holds to its commit. Read: a
 * non-locking read of the lock row. ok: 1 when it may go on.
 */
inline SECTION_TAKE(c, w, res, ok) {
  if
#ifdef SECTION_NO_GUARD
  :: w -> rx[res] = c + 1; secw[res]++; ok = 1
#else
  :: w && db.wc[res] == 0 && db.rc[res] == 0 -> rx[res] = c + 1; secw[res]++; ok = 1
#endif
  :: !w && db.wc[res] == 0 && !db.intent[res] -> secr[res]++; RS_UP(res); ok = 1
  :: else -> ok = 0
  fi
}

/* A section's transaction ends (commit or rollback): every row lock it holds is freed. */
inline SECTION_END(c, w, held, pass) {
  q = 0;
  do
  :: q < NRES ->
     if
     :: (held >> q) & 1 ->
        if
        :: w -> gx[q] = 0; if :: (pass >> q) & 1 -> rx[q] = 0; secw[q]-- :: else fi
        :: !w -> gs[q]--; if :: (pass >> q) & 1 -> secr[q]--; RS_DOWN(q) :: else fi
        fi
     :: else
     fi;
     q++
  :: else -> break
  od;
  q = 0; held = 0; pass = 0
}
/* A section commits: its log rows (granted and released, one per resource) and its business effect. */
inline SECTION_COMMIT(c, k, w, held, pass) {
  q = 0;
  do
  :: q < NRES && !bare -> if :: (pass >> q) & 1 -> NEW_ROW(TOK(c, k + q), RELEASED, w, q, SECTION) :: else fi; q++
  :: else -> break
  od;
  db.biz[c] = TOK(c, k);
  SECTION_END(c, w, held, pass)
}

/* Which replies may be lost (a control that targets one settle loses only that one's). */
#if defined(ONLY_LOST_COMMIT) || defined(NO_LOST_GRANT_REPLY)
#define LOSE_ACQUIRE 0
#else
#define LOSE_ACQUIRE 1
#endif
#if defined(ONLY_LOST_ACQUIRE) || defined(NO_LOST_GRANT_REPLY)
#define LOSE_COMMIT 0
#else
#define LOSE_COMMIT 1
#endif
#ifdef NO_LOST_GRANT_REPLY
#define LOSE_RELEASE 0
#else
#define LOSE_RELEASE 1
#endif

/* What a client forgets when a lock cycle ends (so that finished cycles leave no trace in its state). */
#ifdef KINDS
#ifdef WITNESS_HEALED
#define KINDS_END pl = 0; kc = 0; hz = 0; sd = 0; mk = 0
#else
#define KINDS_END pl = 0; kc = 0; hz = 0; sd = 0
#endif
#else
#define KINDS_END skip
#endif
#define END_CYCLE d_step { NOT_WAITING(c); g = 0; g2 = 0; ok = 0; id = 0; w = 0; kind = 0; si = 0; rr = 0; said = 0; bare = 0; SET_WIN(c, 0); KINDS_END }; goto next

/* The resource of a group's si-th take: the ids' order, or (CALLER_ORDER) the caller's. */
#ifdef CALLER_ORDER
#define ORDR(c, si) ((((c) % 2) == 0) -> (si) : (1 - (si)))
#else
#define ORDR(c, si) (si)
#endif
/* resources a cycle locks: 1, or 2 for a group */
#define NTAKE(kind) (((kind) >= 2) -> 2 : 1)

/* The lost acquire's transaction can run now: another epoch's (it died), or its acquire does not wait. */
#define PENDING_CAN_RUN (pepoch != EPOCH || CAN_ACQUIRE(w, 0))
/*
 * The lost acquire's transaction runs (on the primary it was sent to: a failover since kills it).
 * Its token is the attempt's, TOK(c, k): k moves on only once the attempt is settled. Each step that
 * runs it begins with PENDING_CAN_RUN: a run that would wait for the lock row runs later instead.
 */
inline RUN_PENDING() {
  if :: pepoch == EPOCH -> ACQUIRE(TOK(c, k), w, 1, id, 0); CHECK(); id = 0 :: else fi;
  pending = 0; pepoch = 0
}
/* Still in flight after the settling: it reaches the server now, or dies with its connection. */
inline LATE_PENDING(back) {
  if
  :: pending -> if :: d_step { PENDING_CAN_RUN; k = k - back; RUN_PENDING(); k = k + back } :: d_step { pending = 0; pepoch = 0 } fi
  :: else
  fi;
  SET_WIN(c, 0)
}

#ifdef HEAL
/*
 * The self-healing acquire's look-up (resourceStaleness): the first live grant of resource hres that
 * is stale, read without locks, with the version it has now; 0 when there is none.
 */
inline HEAL_PICK(hres, hid, hver) {
  hid = 1;
  do
  :: hid < NG && !(db.g[hid].st == LIVE && db.g[hid].res == hres && HEAL_STALE(hid)) -> hid++
  :: hid < NG && db.g[hid].st == LIVE && db.g[hid].res == hres && HEAL_STALE(hid) -> hver = db.g[hid].ver; break
  :: hid == NG -> hid = 0; break
  od
}
/*
 * Its reap (reapCandidates, NOWAIT): a lock row held by another transaction ends it with nothing
 * released (it never waits); else the reaper's guarded, versioned release of the grant read.
 */
inline HEAL_REAP(hid, hver) {
  if
  :: ROW_FREE(hid) ->
     if
#ifdef HEAL_NO_GUARD
     :: db.g[hid].st == LIVE ->
#else
     :: db.g[hid].st == LIVE && HEAL_STALE(hid) && db.g[hid].ver == hver ->
#endif
        /* a heal, as the reaper, releases only grants stale on the database clock */
        assert(db.g[hid].stale);
        nw = 1; GIVE_BACK(hid, nw); nw = 0;
        db.g[hid].st = RELEASED; db.g[hid].by = REAPER; FORGET(hid)
     :: else
     fi
  :: else
  fi;
  hid = 0; hver = 0
}
#endif

#ifdef KINDS
/*
 * The acquire of resource res as a write lock (w), a read lock (!w, pl 0) or a permit of a semaphore
 * of pl (the procedures' guards, src/sql/decision.ts): a writer needs no holder; a reader no writer,
 * no permits (permit_limit NULL or no holder) and no intent in force, and clears permit_limit; a
 * permit no writer and either no holder or holders of the same limit with room for one more, and
 * writes its limit. The write guard leaves permit_limit as it is. Refused, kc reports whether the
 * other kind or another limit holds (the refusal's report, read in the same transaction: a reader or
 * writer meets permits; a permit meets a writer, readers, or permits of another limit). No section
 * runs in these runs: the gate is never held by another transaction.
 */
inline ACQUIRE_KIND(tk, w, pl, id, res, kc) {
  id = 0; kc = 0; nr = 0;
  assert(!ROW_HELD(res) && gx[res] == 0 && gs[res] == 0);
  if
  :: !db.ex[res] -> nr = 1
  :: db.ex[res] && pl == 0 && w && db.wc[res] == 0 && db.rc[res] == 0 -> nr = 2
  :: db.ex[res] && pl == 0 && !w && db.wc[res] == 0 && (db.lim[res] == 0 || db.rc[res] == 0) && !db.intent[res] -> nr = 2
  :: db.ex[res] && pl != 0 && db.wc[res] == 0 && (db.rc[res] == 0 || (db.lim[res] == pl && db.rc[res] < pl)) -> nr = 2
  :: else
  fi;
  if
  :: nr != 0 ->
     db.ex[res] = 1;
     if
     :: w -> db.wc[res] = 1; db.intent[res] = 0
     :: !w && pl == 0 -> db.rc[res]++; db.lim[res] = 0
     :: !w && pl != 0 -> db.rc[res]++; db.lim[res] = pl
     fi;
     id = db.next;
     NEW_ROW(tk, LIVE, w, res, 0);
     db.g[id].pk = pl
  :: else ->
     if
     :: pl == 0 -> kc = (db.wc[res] == 0 && db.rc[res] > 0 && db.lim[res] != 0)
     :: else -> kc = (db.wc[res] > 0 || (db.lim[res] == 0 && db.rc[res] > 0) || (db.rc[res] > 0 && db.lim[res] != pl))
     fi;
     /* a refused writer marks its intent */
     if :: w -> db.intent[res] = 1 :: else fi
  fi;
  nr = 0
}

/* sd: the live grants that are stale and whose holder crashed (bit per id): stale until released. */
inline SNAP_DEAD_STALE(sd) {
  sd = 0; i = 1;
  do
  :: i < NG ->
     if
     :: db.g[i].st == LIVE && db.g[i].stale && ((dead >> TOKCLIENT(db.g[i].tok)) & 1) -> sd = sd | (1 << i)
     :: else
     fi;
     i++
  :: else -> break
  od;
  i = 0
}

/*
 * At a refusal by the other kind or limit (ResourceKindError, PermitLimitError), made in the step
 * that decides it: some live grant that disagrees (another kind, or another limit) is not one that
 * was already stale, its holder crashed, when the call began (sd): such grants are healed first.
 */
inline REFUSAL_CHECK(pl, sd) {
  nw = 0; nr = 0; i = 1;
  do
  :: i < NG ->
     if
     :: db.g[i].st == LIVE && db.g[i].res == 0 && db.g[i].pk != pl ->
        nw++; if :: (sd >> i) & 1 -> nr++ :: else fi
     :: else
     fi;
     i++
  :: else -> break
  od;
  /* refused only while a holder of the other kind or limit is not a crashed holder's stale grant */
  assert(nw == 0 || nr < nw);
  nw = 0; nr = 0; i = 0
}

/*
 * The heal as the code runs it (resourceStaleness, then reapCandidates): every stale live grant of
 * the resource, read without locks with its version (at most two: the other clients' grants), then
 * each released if still live, stale and at that version, in one transaction taken NOWAIT. hz: 1
 * when it released one.
 */
inline HEAL2_PICK(hres) {
  hid = 0; hid2 = 0; i = 1;
  do
  :: i < NG ->
     if
     :: db.g[i].st == LIVE && db.g[i].res == hres && HEAL_STALE(i) ->
        if
        :: hid == 0 -> hid = i; hver = db.g[i].ver
        :: else -> assert(hid2 == 0); hid2 = i; hver2 = db.g[i].ver
        fi
     :: else
     fi;
     i++
  :: else -> break
  od;
  i = 0
}
inline HEAL_ONE(x, xv, hz) {
  if
  :: db.g[x].st == LIVE && HEAL_STALE(x) && db.g[x].ver == xv ->
     assert(db.g[x].stale);
     nw = 1; GIVE_BACK(x, nw); nw = 0;
     db.g[x].st = RELEASED; db.g[x].by = REAPER; FORGET(x); hz = 1
  :: else
  fi
}
inline HEAL2_REAP(hz) {
  if
  :: ROW_FREE(hid) && (hid2 == 0 || ROW_FREE(hid2)) ->
     HEAL_ONE(hid, hver, hz);
     if :: hid2 != 0 -> HEAL_ONE(hid2, hver2, hz) :: else fi
  :: else
  fi;
  hid = 0; hver = 0; hid2 = 0; hver2 = 0
}
#endif

#if !defined(LEADER) && !defined(JOBS)
proctype client(byte c) {
  byte k;            /* token counter: the current attempt's token is TOK(c, k) */
  byte cyc;          /* lock cycles begun */
  byte kind;         /* this cycle: 0 a durable grant, 1 a section, 2 a durable group, 3 a section group */
  byte g;            /* the grant held: its id (its token is TOK(c, k - 1)); a group's first grant */
  byte g2;           /* a group's second grant (its token is TOK(c, k - 1), g's TOK(c, k - 2)) */
  byte si;           /* a group's or section's takes so far */
  byte rr;           /* the resource of its current take */
  byte held;         /* a section: resources whose gate it holds (bit per resource) */
  byte pass;         /* a section: resources whose take passed */
  bit w;             /* its mode */
  bit ok;
  bit said;          /* a settled lost commit: reported committed */
  bit infl;          /* a COMMIT sent, its reply lost, its transaction still open */
  bit bare;          /* this cycle: a section without history (BARE) */
  byte id;
  bit pending;       /* a lost acquire's transaction that has not reached the server yet */
  bit pepoch;        /* the failover epoch it was sent in */
#ifdef HEAL
  byte hid, hver;    /* the stale grant a heal read, and its version */
#endif
#ifdef KINDS
  byte pl;           /* this cycle: 0 a read or write lock, else a permit of a semaphore of pl */
  bit kc;            /* the last attempt was refused by the other kind or another limit */
  bit hz;            /* this call healed the resource (it heals once, then is decided again) */
  byte sd;           /* the grants stale, their holders crashed, when this call began (bit per id) */
  byte hid2, hver2;  /* a second stale grant the heal read, and its version */
#ifdef WITNESS_HEALED
  bit mk;            /* this call met the other kind or limit */
#endif
#endif

next:
  do
  :: atomic {
       cyc < NACQ -> cyc++; WAITING(c);
       if
#ifdef SECTION_GROUPS_ONLY
       :: kind = 3; w = 1
#elif defined(GROUPS_ONLY)
       :: kind = 2; w = 1
       :: kind = 3; w = 1
#elif defined(PERMITS)
       :: kind = 0; w = 0
#elif defined(KINDS) && defined(KINDS_TWO_HOLDERS)
       /* clients 0 and 1 take permits of a semaphore of 2; client 2 another kind or limit */
       :: c < 2 -> kind = 0; w = 0; pl = 2
       :: c == 2 -> kind = 0; w = 1; pl = 0
       :: c == 2 -> kind = 0; w = 0; pl = 0
       :: c == 2 -> kind = 0; w = 0; pl = 1
#elif defined(KINDS)
       :: kind = 0; w = 1; pl = 0
       :: kind = 0; w = 0; pl = 0
       :: kind = 0; w = 0; pl = 1
       :: kind = 0; w = 0; pl = 2
#else
       :: kind = 0; if :: w = 1 :: w = 0 fi
#ifdef SECTIONS
       :: kind = 1; if :: w = 1 :: w = 0 fi
#ifdef BARE
       :: kind = 1; bare = 1; if :: w = 1 :: w = 0 fi
#endif
#endif
#ifdef GROUPS
       :: kind = 2; w = 1
       :: kind = 3; w = 1
#ifdef BARE
       :: kind = 3; w = 1; bare = 1
#endif
#endif
#endif
       fi;
       rr = ORDR(c, 0);
       if
       :: kind == 1 || kind == 3 -> goto take
       :: kind == 2 -> goto gone
       :: else
       fi
     };
attempt: skip;
#ifdef PERMIT_PRECHECK
     /* the broken limit check: SELECT the count, go on only if a permit looks free */
     if
     :: d_step { ok = (!db.ex[0] || (db.wc[0] == 0 && db.rc[0] < LIMIT)) }
     fi;
     if
     :: !ok -> if :: goto attempt :: END_CYCLE fi
     :: else -> ok = 0
     fi;
#endif
#ifdef PRECHECK
     /* the reference's pre-check: SELECT the row, go on only if it looks free */
     if
     :: d_step { ok = (!db.ex[0] || (w && db.wc[0] == 0 && db.rc[0] == 0) || (!w && db.wc[0] == 0 && !db.intent[0])) }
     fi;
     if
     :: !ok -> if :: goto attempt :: END_CYCLE fi
     :: else -> ok = 0
     fi;
#endif
     /* an acquire that waits: refused, it tries again or times out; a refused writer marks its intent */
     if
     :: d_step {
          CAN_ACQUIRE(w, 0);
#ifdef KINDS
          /* a call's first attempt: the grants a crashed holder left stale */
          if :: !hz -> SNAP_DEAD_STALE(sd) :: else fi;
          ACQUIRE_KIND(TOK(c, k), w, pl, g, 0, kc); CHECK();
#ifdef REFUSE_BEFORE_HEAL
          if :: kc -> REFUSAL_CHECK(pl, sd) :: else fi;
#else
          /* refused by the other kind again, after the heal: the refusal stands */
          if :: kc && hz -> REFUSAL_CHECK(pl, sd) :: else fi;
#endif
#ifdef WITNESS_HEALED
          /* fails exactly when a call that met the other kind or limit is granted: healing freed it */
          assert(!(g != 0 && mk));
          mk = mk || kc;
#endif
          skip
#else
          ACQUIRE(TOK(c, k), w, 1, g, 0); CHECK();
#endif
#ifdef WITNESS_SHARE
          /* fails exactly when a durable reader is granted while a read section holds: readers share */
          assert(!(g != 0 && !w && secr[0] > 0))
#endif
        } ->
        if
        :: g != 0 -> k++; goto hold
#ifdef KINDS
        :: else ->
           /* refused by the other kind or limit after the call healed (or, the control, before it) */
           if
#ifdef REFUSE_BEFORE_HEAL
           :: kc -> END_CYCLE
#endif
           :: kc && hz -> END_CYCLE
           :: else
           fi;
           if
           :: !hz ->
              /*
               * The call heals once: after a refusal by the other kind or limit always (it decides
               * that refusal), after another refusal when selfHeal is on and the hint allows.
               */
              atomic { HEAL2_PICK(0); if :: hid == 0 && kc -> REFUSAL_CHECK(pl, sd) :: else fi };
              if
              :: hid != 0 -> d_step { HEAL2_REAP(hz); if :: !hz && kc -> REFUSAL_CHECK(pl, sd) :: else fi; CHECK() }
              :: else
              fi;
              if
              :: hz -> goto attempt     /* healed: decided again, in the same call */
              :: !hz && kc -> END_CYCLE /* nothing healed: a holder that is not stale disagrees */
              :: else
              fi
           :: !kc -> skip               /* no heal: selfHeal off, the look-up's hint, or healed already */
           fi;
           /* refused while holders of its own kind hold: the waiting acquire calls again, or times out */
           if :: d_step { hz = 0 }; goto attempt :: END_CYCLE fi
        fi
#else
        :: else ->
#ifdef HEAL
           /* refused: the same call may heal the resource (then it attempts again, or a try answers) */
           if
#ifndef LIVENESS
           :: skip   /* no heal: selfHeal off, or not yet due (the look-up's hint) */
#endif
           :: atomic { HEAL_PICK(0, hid, hver) };
              if :: hid != 0 -> d_step { HEAL_REAP(hid, hver); CHECK() } :: else fi
           fi;
#endif
           if :: goto attempt :: END_CYCLE fi
        fi
#endif
     :: lost < NLOST && LOSE_ACQUIRE ->
        /* the acquire is sent and its reply lost: its transaction may have run, may run later or never */
        d_step { lost++; pending = 1; pepoch = EPOCH; SET_WIN(c, TOK(c, k)) };
        if :: d_step { PENDING_CAN_RUN; RUN_PENDING() } :: skip fi;
        if
        :: skip
        :: d_step { NOT_WAITING(c) }; LATE_PENDING(0); goto crashed   /* the client dies too */
        fi
     fi;
#ifdef LOOKUP_SETTLE
     /* settled by looking the token up: not found counts as never granted */
     if
     :: d_step {
          FIND(TOK(c, k), i); id = (i < NG -> i : 0); i = 0;
          if :: id == 0 -> nogrant[c] = nogrant[c] | (1 << k); k++ :: else fi
        }
     fi;
     if :: id == 0 -> LATE_PENDING(1); goto attempt :: else -> id = 0 fi;
#else
     /* withdrawAcquire: a released row under the attempt's token; a duplicate means it was granted */
     if
     :: d_step {
          FIND(TOK(c, k), i); id = (i < NG -> i : 0);
          if
          :: id == 0 ->
             NEW_ROW(TOK(c, k), RELEASED, w, 0, WITHDRAWN);
             /* never granted, and never will be: a new attempt is safe */
             nogrant[c] = nogrant[c] | (1 << k); k++
          :: else
          fi;
          i = 0;
          CHECK()
        }
     fi;
     if :: id == 0 -> LATE_PENDING(1); goto attempt :: else -> id = 0 fi;
#endif
     /* findGrantByToken: it was granted; live: the caller holds it; released since: nothing is held */
     d_step {
       FIND(TOK(c, k), i);
       if
       :: i < NG && db.g[i].st == LIVE -> g = i
       :: else -> g = 0
       fi;
       i = 0; k++; SET_WIN(c, 0)
     };
     if :: g == 0 -> if :: goto attempt :: END_CYCLE fi :: else fi;
hold: skip;
     d_step { NOT_WAITING(c); ok = 1 };
     /* at most one more statement on the grant before it ends */
     if
     :: d_step {
          ROW_FREE(g);
          /* extend(): lease_until ahead, version + 1 */
          if
          :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE -> db.g[g].stale = 0; SET_EXT(g); BUMP(db.g[g].ver)
          :: else -> ok = 0
          fi;
          CHECK()
        }
#if !defined(KINDS) || defined(KINDS_DOWNGRADE)
     :: w ->
        d_step {
          ROW_FREE(g);
          /* downgrade(): write grant to read grant in one statement, which clears permit_limit */
          if
          :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && db.g[g].wr && db.wc[0] >= 1 ->
             db.g[g].wr = 0; BUMP(db.g[g].ver); db.wc[0]--; db.rc[0]++; w = 0;
             CLEAR_LIMIT(0)
          :: else -> ok = 0
          fi;
          CHECK()
        }
#endif
#if !defined(PERMITS) && !defined(KINDS)
     :: !w ->
        d_step {
          ROW_FREE(g);
          /* tryUpgrade(): read grant to write grant while it is the one holder; else refused at once */
          if
#ifdef UPGRADE_NO_GATE
          :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && !db.g[g].wr && db.wc[0] == 0 && db.rc[0] == 1 ->
#else
          /* it takes the gate NOWAIT, as a durable writer does: a section on the resource refuses it */
          :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && !db.g[g].wr && db.wc[0] == 0 && db.rc[0] == 1 && gs[0] == 0 && gx[0] == 0 ->
#endif
             db.g[g].wr = 1; BUMP(db.g[g].ver); db.wc[0] = 1; db.rc[0] = 0; w = 1
          :: else -> ok = (NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE)
          fi;
          CHECK()
        }
#endif
#ifdef MODE_LOST
     :: lost < NLOST ->
        /*
         * A downgrade or upgrade whose reply was lost: its statement ran, runs later (it is guarded
         * by the mode it expects, so it changes nothing once the change is made) or never. Settled by
         * reading the grant row (findGrantByToken): the new mode: made; the old one: made again; not
         * live: lost.
         */
        lost++;
        if
        :: d_step {
             ROW_FREE(g);
             if
             :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && db.g[g].wr == w && w && db.wc[0] >= 1 ->
                db.g[g].wr = 0; BUMP(db.g[g].ver); db.wc[0]--; db.rc[0]++
             :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && db.g[g].wr == w && !w && db.wc[0] == 0 && db.rc[0] == 1 && gs[0] == 0 && gx[0] == 0 ->
                db.g[g].wr = 1; BUMP(db.g[g].ver); db.wc[0] = 1; db.rc[0] = 0
             :: else
             fi;
             CHECK()
           }
        :: skip
        fi;
        d_step {
          FIND(TOK(c, k - 1), i);
          if
          :: i < NG && db.g[i].st == LIVE && db.g[i].wr != w -> w = db.g[i].wr   /* made */
          :: i < NG && db.g[i].st == LIVE && rx[0] == 0 ->
             /* not made: the change runs again (its guard decides; refused is false) */
             if
             :: w && db.wc[0] >= 1 -> db.g[g].wr = 0; BUMP(db.g[g].ver); db.wc[0]--; db.rc[0]++; w = 0
             :: !w && db.wc[0] == 0 && db.rc[0] == 1 && gs[0] == 0 && gx[0] == 0 -> db.g[g].wr = 1; BUMP(db.g[g].ver); db.wc[0] = 1; db.rc[0] = 0; w = 1
             :: else
             fi
          :: else -> ok = 0                           /* LockLostError */
          fi;
          i = 0;
          /* the handle's mode is the row's: its release gives back the count the row holds */
          assert(!ok || db.g[g].wr == w)
        }
#endif
     :: skip
     fi;
     /* found lost: the cycle ends (LockLostError) */
     if :: !ok -> END_CYCLE :: else fi;
     if
     :: d_step { ROW_FREE(g); FENCE(c, g, TOK(c, k - 1), w, ok); CHECK() }; END_CYCLE   /* the fenced business commit */
     :: /*
         * The fence ran and the business COMMIT was sent; its reply is lost. Until the transaction
         * commits or dies with its connection, it holds the grant row and the lock row.
         */
        d_step {
          lost < NLOST && LOSE_COMMIT && ROW_FREE(g) && NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE;
          lost++; infl = 1; rx[0] = c + 1; SET_WIN(c, TOK(c, k - 1))
        };
        do
        :: d_step { infl; rx[0] = 0; infl = 0; FENCE(c, g, TOK(c, k - 1), w, ok); CHECK() }   /* it commits */
        :: d_step { infl; rx[0] = 0; infl = 0 }                                               /* it rolls back */
#ifdef LOOKUP_COMMIT_SETTLE
        :: break      /* the settle does not wait for it */
#else
        :: !infl -> break   /* the settle's release waits for the lost transaction's row lock */
#endif
        od;
        skip;
#ifdef LOOKUP_COMMIT_SETTLE
        /* settled by reading the grant row without a lock: released by the holder means committed */
        d_step { FIND(TOK(c, k - 1), i); said = (i < NG && db.g[i].by == HOLDER); i = 0 };
        if
        :: infl ->
           if
           :: d_step { rx[0] = 0; infl = 0; FENCE(c, g, TOK(c, k - 1), w, ok); CHECK() }
           :: d_step { rx[0] = 0; infl = 0 }
           fi
        :: else
        fi;
#else
        /* settleLostCommit: release again; released now: it rolled back; else read the grant row */
        d_step {
          ROW_FREE(g);
          RELEASE(g, TOK(c, k - 1), w, HOLDER, ok);
          if
          :: ok -> said = 0
          :: else ->
             FIND(TOK(c, k - 1), i);
             /* released by the holder: the commit happened and the caller gets its value; else lost */
             said = (i < NG && db.g[i].by == HOLDER);
             i = 0
          fi;
          CHECK()
        };
#endif
        /* the caller is told "committed" exactly when the business effect committed */
        d_step { assert(said == (db.biz[c] == TOK(c, k - 1))) };
        END_CYCLE
#ifdef GRANT_FORM
     :: /*
         * withWriteGrant: the caller's own transaction ran the fence and ended with a reply, committed
         * or rolled back after the fence (its work threw); isLive() then reads the grant row: live:
         * not committed, the caller releases it; released by the holder: committed. That read is a
         * settle's too: the purge's floor keeps the row for it.
         */
        d_step { SET_WIN(c, TOK(c, k - 1)) };
        if
        :: d_step { ROW_FREE(g); FENCE(c, g, TOK(c, k - 1), w, ok); CHECK() }
        :: skip
        fi;
        d_step {
          FIND(TOK(c, k - 1), i);
          said = (i < NG && db.g[i].st == RELEASED && db.g[i].by == HOLDER);
          ok = (i < NG && db.g[i].st == LIVE);
          i = 0;
          assert(said == (db.biz[c] == TOK(c, k - 1)))
        };
        if :: ok -> d_step { ROW_FREE(g); RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() } :: else fi;
        END_CYCLE
#endif
     :: d_step { ROW_FREE(g); RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() }; END_CYCLE   /* release() alone */
     :: lost < NLOST && LOSE_RELEASE ->
        /* release() whose reply was lost: it ran or not; settled by releasing again */
        lost++;
        if
        :: d_step { ROW_FREE(g); RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() }
        :: skip
        fi;
        d_step { ROW_FREE(g); RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() };
        END_CYCLE
     :: goto crashed     /* the client dies holding the grant */
     fi;

     /*
      * A one-commit section (kind 1) or a section group (kind 3): one transaction takes each
      * resource's gate (write: FOR UPDATE, read: LOCK IN SHARE MODE), waiting for it, then decides on
      * its lock row, in the order of the resource ids; logs a row granted and released per resource;
      * runs the work; commits once.
      */
take:
#ifdef LIVENESS
     atomic { if :: held != 0 -> gwait = gwait | (1 << c) :: else fi };
#endif
     if
     :: w -> atomic { gs[rr] == 0 && gx[rr] == 0 -> gx[rr] = c + 1; held = held | (1 << rr) }
     :: !w -> atomic { gx[rr] == 0 -> gs[rr]++; held = held | (1 << rr) }
     fi;
#ifdef LIVENESS
     d_step { gwait = gwait & ~(1 << c) };
#endif
     d_step {
       /* the take: write, the guarded UPDATE of the lock row (it waits for the row's lock); read, a plain read */
#ifdef READ_SECTION_TAKES_ROW
       rx[rr] == 0;
#else
       (!w || rx[rr] == 0);
#endif
       SECTION_TAKE(c, w, rr, ok);
       if :: ok -> pass = pass | (1 << rr); si++; rr = ORDR(c, si) :: else fi;
       CHECK()
     };
     if
     :: ok && si < NTAKE(kind) -> goto take
     :: ok && si >= NTAKE(kind)
     :: else ->
        /* refused: the transaction rolls back whole; a writer commits its intent, then waits or times out */
        d_step { SECTION_END(c, w, held, pass); CHECK() };
        if
        :: w -> d_step { if :: rx[rr] == 0 -> db.intent[rr] = 1 :: else fi; CHECK() }
        :: else
        fi;
        if :: d_step { si = 0; rr = ORDR(c, 0) }; goto take :: END_CYCLE fi
     fi;
     /* it holds every resource: the log rows, the work, then one COMMIT */
     if
     :: d_step { SECTION_COMMIT(c, k, w, held, pass); CHECK() }; k = k + 2; END_CYCLE
     :: d_step { SECTION_END(c, w, held, pass); CHECK() }; goto crashed   /* the client dies: the server rolls back */
     :: d_step { SECTION_END(c, w, held, pass); CHECK() };
        /* paused past the idle bound: the server rolled it back; its late COMMIT fails as a lost reply */
        goto ssettle
     :: lost < NLOST ->
        /* the COMMIT is sent and its reply lost: it committed, rolls back, or is still in flight */
        d_step { lost++; infl = 1; SET_WIN(c, TOK(c, k)) };
        do
        :: d_step { infl; SECTION_COMMIT(c, k, w, held, pass); infl = 0; CHECK() }
        :: d_step { infl; SECTION_END(c, w, held, pass); infl = 0; CHECK() }
        /* the withdrawal's insert under the section's token waits for its uncommitted row */
        :: !infl -> break
        od;
ssettle: skip;
        if
#ifndef BARE_SETTLE
        /* without history: no row to settle by, reported unknown (LockOutcomeUnknownError), no claim */
        :: bare -> skip
#endif
        :: else ->
          /* settleLostCommit (section): a withdrawn row under its token; a duplicate means it committed */
          d_step {
            SET_WIN(c, TOK(c, k));
            FIND(TOK(c, k), i);
            said = (i < NG);
            if :: !said -> NEW_ROW(TOK(c, k), RELEASED, w, 0, WITHDRAWN) :: else fi;
            i = 0;
            assert(said == (db.biz[c] == TOK(c, k)));
            CHECK()
          }
        fi;
        k = k + 2;
        END_CYCLE
     fi;

     /*
      * A durable group (kind 2). First the one-call acquire (rwlock_acquire_group, migration 011):
      * one transaction decides both resources, in the order of the ids, as ACQUIRE decides each
      * (gate included); both are taken, or none is (rolled back, no intent marked). It waits, as
      * the acquire does, only on a lock row another transaction holds while its gate is free.
      * Refused, the group takes the acquire per resource below, within the same wait.
      */
gone:
     /* or skipped: a manager without procedures, or a waiter of its own queued for a resource */
     if :: skip :: goto gtake fi;
     atomic {
       /* rr: the first resource in the ids' order (set as the cycle began), 1 - rr the second */
       CAN_ACQUIRE(1, rr) && (!GROUP_FREE(rr) || CAN_ACQUIRE(1, 1 - rr));
       if
       :: GROUP_FREE(rr) && GROUP_FREE(1 - rr) ->
          ACQUIRE(TOK(c, k), 1, 0, g, rr); k++;
          ACQUIRE(TOK(c, k), 1, 0, g2, 1 - rr); k++;
          assert(g != 0 && g2 != 0); si = 2
#ifdef GROUP_PARTIAL
       /* the defect: the take of the first resource is committed when the second is refused */
       :: GROUP_FREE(rr) && !GROUP_FREE(1 - rr) -> ACQUIRE(TOK(c, k), 1, 0, id, rr); id = 0
#endif
       :: else
       fi;
       CHECK()
     };
     if
     :: si == 2 -> goto gheld
     :: else ->
        /* refused: the client drops the call's grant ids and tokens, so nothing may be live under them */
        d_step { FIND(TOK(c, k), i); assert(i == NG || db.g[i].st != LIVE); i = 0 }
     fi;
     /* The acquire per resource: in the order of the ids, within one wait; all or nothing when a take times out. */
gtake:
     atomic { CAN_ACQUIRE(1, ORDR(c, si)); rr = ORDR(c, si); ACQUIRE(TOK(c, k), 1, 1, id, rr); CHECK() };
     if
     :: id != 0 -> if :: si == 0 -> g = id :: else -> g2 = id fi; id = 0; k++; si++;
        if :: si < 2 -> goto gtake :: else fi
     :: else ->
        if
        :: goto gtake
#ifdef HEAL
        :: atomic { HEAL_PICK(rr, hid, hver) };
           if :: hid != 0 -> d_step { HEAL_REAP(hid, hver); CHECK() } :: else fi;
           goto gtake
#endif
        :: /* timed out or aborted: the grants taken are released before the error reaches the caller */
#ifndef GROUP_KEEPS
           if :: g != 0 -> d_step { ROW_FREE(g); RELEASE(g, TOK(c, k - 1), 1, HOLDER, ok); CHECK() } :: else fi;
#endif
           /* all or nothing: a group that failed holds none of its grants */
           d_step { assert(g == 0 || db.g[g].tok != TOK(c, k - 1) || db.g[g].st != LIVE) };
           END_CYCLE
        fi
     fi;
gheld: skip;
     d_step { NOT_WAITING(c) };
     if
     :: d_step {
          ROW_FREE(g) && ROW_FREE(g2);
          /* the group's fence: one UPDATE changing 2 rows per grant, or the transaction rolls back */
#ifdef GROUP_FIRST_FENCE
          ok = (db.g[g].tok == TOK(c, k - 2) && db.g[g].st == LIVE);
#else
          ok = (db.g[g].tok == TOK(c, k - 2) && db.g[g].st == LIVE && db.g[g2].tok == TOK(c, k - 1) && db.g[g2].st == LIVE);
#endif
          if
          :: ok ->
             /* the business effect commits only while every grant of the group is the caller's and live */
             assert(db.g[g2].tok == TOK(c, k - 1) && db.g[g2].st == LIVE);
             RELEASE(g, TOK(c, k - 2), 1, HOLDER, ok); RELEASE(g2, TOK(c, k - 1), 1, HOLDER, ok);
             db.biz[c] = TOK(c, k - 2)
          :: else
          fi;
          CHECK()
        };
        if
        :: ok -> END_CYCLE
        :: else ->
           /* LockLostError: the rest are released, each by its own guarded release */
           d_step { ROW_FREE(g); RELEASE(g, TOK(c, k - 2), 1, HOLDER, ok); CHECK() };
           d_step { ROW_FREE(g2); RELEASE(g2, TOK(c, k - 1), 1, HOLDER, ok); CHECK() };
           END_CYCLE
        fi
     :: goto crashed     /* the client dies holding the group */
     fi
  :: else -> break
  od;
crashed:
  skip;
#ifdef KINDS
  /* its grants have no holder any more (a client that ended its cycles holds none) */
  d_step { dead = dead | (1 << c) }
#endif
}
#endif

#ifdef LEADER
#ifndef NLEAD
#define NLEAD 2
#endif
/*
 * A campaign (src/lock/leader/campaign.ts, term.ts): up to NACQ terms. Each: the name's write grant,
 * waited for (a refused attempt tries again, after a heal or not; close() ends the wait); the lease's
 * first extension (not live: lost before leading); then up to NLEAD steps of leading, each a renewal
 * (extend) or a business transaction whose last statement is the term's fence (TERM_FENCE_SQL: the
 * grant row, live, its token, its lease not run out, its version bumped; the row held to the
 * COMMIT); then the term ends: released (resign, close, a failed callback, its deadline passed) or
 * lost (a renewal or a fence found it released or its lease run out; term.end releases it if it is
 * still live), or the campaigner crashes. Pauses need no step: the lease runs out meanwhile (the
 * clock), and the reaper, a successor's heal or the operator take the grant. The fence's lease test
 * is modelled as the reaper's staleness (the lease run out past its grace): it passes in more states
 * than the real one, which only adds behaviours.
 */
proctype campaigner(byte c) {
  byte k;            /* terms won: the current term's token is TOK(c, k - 1) */
  byte g;            /* the term: its write grant's id */
  byte mine;         /* ghost: the last term this campaigner led */
  byte n;            /* steps of leading in this term */
  bit ok;
#ifdef HEAL
  byte hid, hver;    /* the stale grant a heal read, and its version */
#endif

campaign:
  if
  :: k < NACQ -> d_step { WAITING(c) }
  :: else -> goto closed
  fi;
attempt:
  skip;
  d_step {
    /* waitForGrant: the write grant's acquire (its intent mark, which holds back readers only, left out) */
    CAN_ACQUIRE(1, 0); ACQUIRE(TOK(c, k), 1, 0, g, 0); CHECK()
  };
  if
  :: g == 0 ->
#ifdef HEAL
     /* refused: it may heal the name (a leader whose lease ran out, a crashed one's grant) */
     if
#ifndef LIVENESS
     :: skip
#endif
     :: atomic { HEAL_PICK(0, hid, hver) };
        if :: hid != 0 -> d_step { HEAL_REAP(hid, hver); CHECK() } :: else fi
     fi;
#endif
     /* it tries again, or close() ends the campaign */
     if :: goto attempt :: d_step { NOT_WAITING(c) }; goto closed fi
  :: else -> d_step { NOT_WAITING(c); k++ }
  fi;
  if
  :: d_step {
       /* leadIn: the lease's first extension; not live: lost before it led */
       ROW_FREE(g);
       ok = (NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE);
       if :: ok -> db.g[g].stale = 0; SET_EXT(g); BUMP(db.g[g].ver) :: else fi;
       CHECK()
     }
  :: goto crashed     /* it dies before the lease's first extension: an unleased grant */
  fi;
  if :: !ok -> d_step { g = 0 }; goto campaign :: else fi;
  d_step {
    /* the term leads: a higher term than any this campaigner led before */
    assert(g > mine); mine = g; n = 0
  };
lead:
  skip;
  if
  :: n < NLEAD ->
     d_step {
       /* a renewal: the lease extended (one late or not sent is a pause: the lease runs out meanwhile) */
       ROW_FREE(g); n++;
       ok = (NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE);
       if :: ok -> db.g[g].stale = 0; BUMP(db.g[g].ver) :: else fi;
       CHECK()
     };
     if :: ok -> goto lead :: else -> goto lostterm fi
  :: n < NLEAD ->
#ifdef LEADER_UNFENCED
     d_step {
       /* a business transaction without the term's fence (the defect): it commits while it believes it leads */
       n++; ok = 1
     };
#elif defined(TERM_FENCE_UNLOCKED)
     d_step {
       /* a business transaction whose fence checks the grant without holding its row (the defect) */
       ROW_FREE(g); n++; ok = (NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && !db.g[g].stale)
     };
#else
     d_step {
       /* a business transaction, its last statement the term's fence: the grant row held to the COMMIT */
       ROW_FREE(g); n++;
       ok = (NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && !db.g[g].stale);
       if :: ok -> fx = g :: else fi
     };
#endif
     if
     :: ok ->
        if
        :: d_step {
             /* the business transaction's COMMIT: the fence's change (its version) and the term's writes */
#if !defined(LEADER_UNFENCED) && !defined(TERM_FENCE_UNLOCKED)
             fx = 0; BUMP(db.g[g].ver);
#endif
             /* every business commit of term t comes before every one of term t + 1 */
             assert(g >= lastterm);
             lastterm = g;
             CHECK()
           };
           goto lead
        :: d_step { fx = 0 }; goto crashed   /* it dies before its COMMIT: rolled back, the row freed */
        fi
     :: else -> goto lostterm    /* LockLostError: it rolls back; the term no longer leads */
     fi
  :: d_step {
       /* the term ends: resign(), close(), a failed callback or its deadline: its grant released */
       ROW_FREE(g); RELEASE(g, TOK(c, k - 1), 1, HOLDER, ok); CHECK(); g = 0; n = 0; ok = 0
     };
     goto campaign
  :: goto crashed     /* it dies leading: its grant is left to its lease */
  fi;
lostterm:
  if
  :: d_step {
       /* the term is lost: term.end releases the grant if it is still live */
       ROW_FREE(g); RELEASE(g, TOK(c, k - 1), 1, HOLDER, ok); CHECK()
     }
  :: skip   /* a renewal that found it released marked the grant lost: no release */
  fi;
  d_step { g = 0; n = 0; ok = 0 };
  goto campaign;
closed:
  skip;
crashed:
  skip
}
#endif

#ifdef JOBS
/*
 * The run's commit, with lockAtLeastFor (src/sql/hand-over.ts): RELEASE_SQL with nothing given back
 * (the job's grant row leaves live, released by its holder; the resource's count stays), then
 * HAND_OVER_SQL (the successor row, live, of the same resource, mode and grant time, leased to the
 * end of the window), then the run's writes, in one COMMIT. The job's grant has token TOK(c, k - 2),
 * the successor TOK(c, k - 1).
 */
inline HAND_OVER(c, g, k, ok) {
  ok = 0;
  if
  :: NAMED(g, TOK(c, k - 2)) && db.g[g].st == LIVE && db.g[g].wr ->
     ok = 1;
     db.g[g].st = RELEASED; db.g[g].by = HOLDER; FORGET(g);
     kg = db.next;
     NEW_ROW(TOK(c, k - 1), LIVE, 1, 0, 0);
     /* a run commits only when no earlier run's lockAtLeastFor window is open */
     assert(!keep);
     db.biz[c] = TOK(c, k - 2);
     keep = 1
  :: else
  fi
}

/*
 * An exclusive job's instance (src/lock/scheduled/exclusive.ts, runExclusiveJob with
 * lockAtLeastFor): NACQ fires. Each: one attempt at the job's write grant (a try: refused, it may
 * heal and attempt once more, else the fire is skipped); the lease's first extension; the run,
 * whose transaction commits the hand-over, or whose COMMIT reply is lost (settled as any fence's),
 * or that fails (nothing committed: the job's grant kept, then released), or the instance dies;
 * after a commit, the successor looked up by its token and released once lockAtLeastFor has passed
 * since the grant on the database clock (releaseAfterAtLeast), or left to its lease by a crash.
 */
proctype job(byte c) {
  byte k;            /* token counter */
  byte cyc;          /* fires begun */
  byte g;            /* the run's grant (token TOK(c, k - 2) once granted) */
  byte s;            /* the hold after the run: its successor (token TOK(c, k - 1)) */
  bit ok;
  bit said;          /* a settled lost commit: reported committed */
  bit infl;          /* the COMMIT sent, its reply lost, its transaction still open */
#ifdef HEAL
  byte hid, hver;
#endif

next:
  do
  :: cyc < NACQ ->
     cyc++;
     d_step {
       /* tryWrite: one attempt at the job's write grant, no waiting */
       CAN_ACQUIRE(1, 0); ACQUIRE(TOK(c, k), 1, 0, g, 0); CHECK()
     };
#ifdef HEAL
     if
     :: g == 0 ->
        /* refused: the try may heal the resource, then attempt once more */
        if
        :: skip
        :: atomic { HEAL_PICK(0, hid, hver) };
           if
           :: hid != 0 ->
              d_step { HEAL_REAP(hid, hver); CHECK() };
              d_step {
                /* tryWrite's attempt after the heal */
                CAN_ACQUIRE(1, 0); ACQUIRE(TOK(c, k), 1, 0, g, 0); CHECK()
              }
           :: else
           fi
        fi
     :: else
     fi;
#endif
     if :: g == 0 -> goto next :: else -> k = k + 2 fi;    /* refused: { ran: false } */
     d_step {
       /* keepAlive.first: the lease's first extension (lockAtMostFor) */
       ROW_FREE(g);
       ok = (NAMED(g, TOK(c, k - 2)) && db.g[g].st == LIVE);
       if :: ok -> db.g[g].stale = 0; BUMP(db.g[g].ver) :: else fi;
       CHECK()
     };
     if :: !ok -> goto ended :: else fi;
     if
#ifdef HAND_OVER_TWO_STEPS
     :: d_step {
          /* the run's COMMIT with a fence that releases the job's grant (the defect: no successor yet) */
          ROW_FREE(g);
          RELEASE(g, TOK(c, k - 2), 1, HOLDER, ok);
          if :: ok -> assert(!keep); db.biz[c] = TOK(c, k - 2); keep = 1; kg = 0 :: else fi;
          CHECK()
        };
        if
        :: ok ->
           d_step {
             /* then the successor, taken by an acquire of its own (the defect) */
             CAN_ACQUIRE(1, 0); ACQUIRE(TOK(c, k - 1), 1, 0, s, 0); if :: s != 0 -> kg = s :: else fi; s = 0; CHECK()
           }
        :: else
        fi;
#else
     :: d_step {
          /* the run's COMMIT: its writes and, last, the hand-over to the successor */
          ROW_FREE(g); HAND_OVER(c, g, k, ok); CHECK()
        };
#endif
        if :: ok -> goto handed :: else -> goto ended fi   /* LockLostError: nothing committed */
     :: d_step {
          /* the run's COMMIT is sent and its reply lost: until it commits or dies it holds the rows */
          lost < NLOST && ROW_FREE(g) && NAMED(g, TOK(c, k - 2)) && db.g[g].st == LIVE;
          lost++; infl = 1; rx[0] = c + 1
        };
        do
        :: d_step {
             /* the lost COMMIT commits: the hand-over and the run's writes */
             infl; rx[0] = 0; infl = 0; HAND_OVER(c, g, k, ok); CHECK()
           }
        :: d_step { infl; rx[0] = 0; infl = 0 }   /* it rolls back */
        :: !infl -> break
        od;
        if :: skip :: goto crashed fi;
        d_step {
          /* settleLostCommit: release again (it waits for the row); released now: rolled back; else the row says */
          ROW_FREE(g);
          RELEASE(g, TOK(c, k - 2), 1, HOLDER, ok);
          if
          :: ok -> said = 0
          :: else -> FIND(TOK(c, k - 2), i); said = (i < NG && db.g[i].by == HOLDER); i = 0
          fi;
          CHECK()
        };
        /* the caller is told "committed" exactly when the run's writes (and the hand-over) committed */
        d_step { assert(said == (db.biz[c] == TOK(c, k - 2))) };
        if :: said -> goto handed :: else -> goto ended fi
     :: d_step {
          /* the run fails: nothing committed; the job's grant is kept, then released */
          ROW_FREE(g); RELEASE(g, TOK(c, k - 2), 1, HOLDER, ok); CHECK()
        };
        goto ended
     :: goto crashed   /* the instance dies in its run: rolled back, the grant left to its lease */
     fi;
handed:
     skip;
     d_step {
       /* the hold after the run: the successor, looked up by its token (not live: released since) */
       FIND(TOK(c, k - 1), i); if :: i < NG && db.g[i].st == LIVE -> s = i :: else -> s = 0 fi; i = 0
     };
     if
     :: s != 0 ->
        if
        :: d_step {
             /* releaseAfterAtLeast: once the database clock says lockAtLeastFor has passed since the grant */
             !(keep && kg == s) && ROW_FREE(s); RELEASE(s, TOK(c, k - 1), 1, HOLDER, ok); CHECK()
           }
        :: goto crashed   /* the instance dies: the successor's lease ends the hold */
        fi
     :: else
     fi;
ended:
     skip;
     d_step { g = 0; s = 0; ok = 0; said = 0 }
  :: else -> break
  od;
crashed:
  skip
}

/* The database clock passes a committed run's lockAtLeastFor window (at any moment after its commit). */
active proctype window() {
  do
  :: d_step { keep; keep = 0; kg = 0 }
  od
}
#endif

/*
 * The reaper: a stale SELECT without locks, then the versioned release in its own transaction, one
 * grant at a time (a batch is its grants' single reaps run back to back in one transaction).
 */
#ifndef NO_REAPER
active proctype reaper() {
  byte id, cver;
  do
  :: atomic {
       /* selectStale: the first live grant stale on the reaper's clock, and the version it has now */
       id = 1;
       do
       :: id < NG && !(db.g[id].st == LIVE && REAPER_STALE(id)) -> id++
       :: id < NG && db.g[id].st == LIVE && REAPER_STALE(id) -> cver = db.g[id].ver; break
       :: id == NG -> id = 0; break
       od
     };
     if
     :: id != 0 ->
        d_step {
          ROW_FREE(id);
          /* reapCandidates: lock the row; still live, stale and unchanged: release it */
          if
#ifdef UNVERSIONED_REAPER
          /* the reference: UPDATE ... SET status = released WHERE id = ? AND version = ? */
          :: db.g[id].ver == cver ->
#else
          :: db.g[id].st == LIVE && REAPER_STALE(id) && db.g[id].ver == cver ->
#endif
             /* the reaper releases only grants stale on the database clock */
             assert(db.g[id].stale);
             nw = 1; GIVE_BACK(id, nw); nw = 0;
             db.g[id].st = RELEASED; db.g[id].by = REAPER; FORGET(id)
          :: else
          fi;
          id = 0; cver = 0;
          CHECK()
        }
     :: else
     fi
  od
}
#endif

/*
 * An operator's forceRelease of a grant it names by id: findGrantRef reads the grant's mode and token,
 * then the guarded release runs with them (one step here: a change of the row in between makes the
 * guarded release change nothing, which the release alone already covers).
 */
active proctype operator() {
  byte id, tk;
  bit w, ok;
  if
  :: atomic {
       select(id : 1 .. NG - 1);
       if
       :: db.g[id].tok != 0 ->
          d_step {
            ROW_FREE(id); tk = db.g[id].tok; w = db.g[id].wr; RELEASE(id, tk, w, OPERATOR, ok); CHECK();
#ifdef JOBS
            /* an operator's release of the hold ends it: lockAtLeastFor is the holders' promise, not the operator's */
            if :: ok && id == kg -> keep = 0; kg = 0 :: else fi;
#endif
            tk = 0; w = 0; ok = 0
          }
       :: else
       fi;
       id = 0
     }
  :: skip
  fi
}

#ifdef REPAIR
/*
 * repairLockCounts for resource 0: lock its lock row (waiting for any other holder of that lock),
 * count the live grants with a fresh read, set the counts from them, commit.
 */
active proctype repairer() {
  byte lw, lr;
#ifdef REPAIR_COUNT_FIRST
  /* counted before the row is locked: a grant committed in between is not counted */
  d_step {
    i = 1;
    do
    :: i < NG -> if :: db.g[i].st == LIVE && db.g[i].res == 0 -> if :: db.g[i].wr -> lw++ :: else -> lr++ fi :: else fi; i++
    :: else -> break
    od;
    i = 0
  };
  d_step { rx[0] == 0; db.wc[0] = lw; db.rc[0] = lr; lw = 0; lr = 0; CHECK() }
#else
  d_step {
    rx[0] == 0;
    i = 1;
    do
    :: i < NG -> if :: db.g[i].st == LIVE && db.g[i].res == 0 -> if :: db.g[i].wr -> lw++ :: else -> lr++ fi :: else fi; i++
    :: else -> break
    od;
    i = 0;
    db.wc[0] = lw; db.rc[0] = lr; lw = 0; lr = 0;
    CHECK()
  }
#endif
}
#endif

#ifdef PURGE
/*
 * The retention purge: deletes a released row old enough (any retention, down to 1 ms), but never a
 * row an unfinished settling may still read (its floor). No step reads a released row except a
 * settling, which reads the row of its own token (and a late acquire's duplicate check, whose token
 * is a settling's too), so deleting any other row changes nothing a step reads: the model's purge
 * deletes, once, at any moment, a released row under a token some settling is open for.
 */
active proctype purge() {
  byte id;
  if
  :: atomic {
       select(id : 1 .. NG - 1);
       d_step {
         if
         :: db.g[id].tok != 0 && db.g[id].st == RELEASED && IN_WINDOW(db.g[id].tok) && !NEEDED(db.g[id].tok) ->
            db.g[id].tok = 0; db.g[id].st = 0; db.g[id].wr = 0; db.g[id].res = 0; db.g[id].ver = 0;
            db.g[id].stale = 0; db.g[id].by = 0; db.g[id].gb = 0
         :: else
         fi;
         id = 0
       }
     }
  :: skip
  fi
}
#endif

/*
 * The database clock: grants age past the cutoff, leases and writer-intent marks run out. A live
 * grant turns stale (STALE_AT_SQL passes) when its lease, if it has one, runs out, or, if it has none,
 * when it passes the cutoff: at any moment, so any lease, shorter or longer than the cutoff, is one
 * of the runs. With LONG_CUTOFF no grant reaches the cutoff: only a lease running out makes one stale.
 */
#ifdef LONG_CUTOFF
#define MAY_GO_STALE(id) (db.g[id].ext)
#else
#define MAY_GO_STALE(id) (1)
#endif
#ifdef JOBS
/* a hand-over's successor is leased to the end of its run's window: it is not stale before */
#define MAY_GO_STALE_NOW(id) (MAY_GO_STALE(id) && !(keep && kg == (id)))
#else
#define MAY_GO_STALE_NOW(id) MAY_GO_STALE(id)
#endif
active proctype clock() {
  byte id;
  do
  :: atomic { select(id : 1 .. NG - 1); if :: db.g[id].st == LIVE && MAY_GO_STALE_NOW(id) -> db.g[id].stale = 1; SET_OLD(id) :: else fi; id = 0 }
  od
}

/* A writer-intent mark runs out (its own process, so that weak fairness lets it run out). */
active proctype intent_clock() {
#ifndef INTENT_NO_EXPIRY
  do
  :: db.intent[0] -> db.intent[0] = 0
  :: db.intent[1] -> db.intent[1] = 0
  od
#else
  skip
#endif
}

#ifndef NOFAILOVER
/* Asynchronous replication and one failover: the replica catches up, or is promoted as it is. */
inline COPY(to, from) {
  j = 1;
  do
  :: j < NG ->
     to.g[j].tok = from.g[j].tok; to.g[j].st = from.g[j].st; to.g[j].wr = from.g[j].wr; to.g[j].res = from.g[j].res;
     to.g[j].ver = from.g[j].ver; to.g[j].stale = from.g[j].stale; COPY_EXT(to, from, j); COPY_OLD(to, from, j);
     to.g[j].by = from.g[j].by; to.g[j].gb = from.g[j].gb;
     j++
  :: else -> break
  od;
  j = 0;
  do
  :: j < NC -> to.biz[j] = from.biz[j]; j++
  :: else -> break
  od;
  j = 0;
  do
  :: j < NRES -> to.ex[j] = from.ex[j]; to.wc[j] = from.wc[j]; to.rc[j] = from.rc[j]; to.intent[j] = from.intent[j]; j++
  :: else -> break
  od;
  j = 0;
  to.next = from.next
}

active proctype replication() {
  do
  :: !failed -> d_step {
       /* the replica catches up with the primary */
       COPY(rep, db)
     }
  :: !failed -> d_step {
       /* failover: the replica is promoted as it is */
       COPY(db, rep); failed = 1;
       /* the grant rows past the replica's AUTO_INCREMENT are gone; their ids will be given out again */
       /* transactions in flight on the old primary die with it */
       CHECK()
     }
  :: failed -> break
  od
}
#endif

init {
  atomic {
    db.next = 1;
    /* the other resource's lock row exists (groups use it; NO_RESOURCE_ID's UPDATE reaches it) */
    db.ex[1] = 1;
#ifdef SECTIONS
    /* sections run on a resource whose rows exist: first use is the durable acquire's */
    db.ex[0] = 1;
#endif
#ifndef NOFAILOVER
    rep.next = 1;
    rep.ex[1] = 1;
#endif
    i = 0;
    do
#ifdef LEADER
    :: i < NC -> run campaigner(i); i++
#elif defined(JOBS)
    :: i < NC -> run job(i); i++
#else
    :: i < NC -> run client(i); i++
#endif
    :: else -> break
    od;
    i = 0
  }
}

#ifdef LIVENESS
#if NG > 10
#error "ANY_STALE covers ids 1..9"
#endif
#define ANY_STALE (STALE(1 % NG) || STALE(2 % NG) || STALE(3 % NG) || STALE(4 % NG) || STALE(5 % NG) || STALE(6 % NG) || STALE(7 % NG) || STALE(8 % NG) || STALE(9 % NG))
#define FREE_WITH_WAITER (waiting != 0 && db.wc[0] == 0 && db.rc[0] == 0)
/* every stale grant is eventually released (or extended): never stale for ever */
ltl stale_released { [] <> !ANY_STALE }
/* a free resource is eventually granted to a waiter (or no one waits for it any more) */
ltl free_granted { [] <> !FREE_WITH_WAITER }
/* a section group never waits for ever on a gate while it holds another */
ltl group_progress { [] <> (gwait == 0) }
/* no client waits for ever behind a stale grant (with NO_REAPER: healed by the waiter's own acquire) */
ltl waiter_heals { [] <> !(waiting != 0 && ANY_STALE) }
#endif
