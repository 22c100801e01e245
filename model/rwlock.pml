/*
 * mysql-rwlock's lock protocol, for Spin. docs/design.md ("The model") maps every step below to the
 * statement or transaction of the library that it abstracts, and says what is bounded and why.
 *
 * One atomic step (d_step) is one statement or one transaction of the real code: every transaction
 * of the lock locks the rows it decides on (a guarded UPDATE or a locking read) and holds those locks
 * to its commit, so its effect is that of running alone at its commit point. Every state between
 * steps is therefore a commit boundary, and CHECK() runs at the end of every writing step.
 *
 * Configuration (spin -D...):
 *   NC      clients (2 or 3)              NACQ   lock cycles per client
 *   NLOST   lost replies in the whole run NOFAILOVER  no asynchronous failover
 *   LIVENESS  compile the ltl formulas (progress runs)
 * Negative controls, each a defect of the reference design or of an earlier version:
 *   NO_RESOURCE_ID     the acquire UPDATE lacks resource_id = ?: any row that passes the guard grants
 *   PRECHECK           a SELECT decides; the acquire's UPDATE that follows is not guarded
 *   UNVERSIONED_REAPER versions never change and the reaper's write is guarded by version alone
 *   RELEASE_AFTER_REAP a release gives the count back even when the grant row was no longer live
 *   CLIENT_CLOCK       the reaper judges staleness on its own clock, which runs ahead
 *   ID_ONLY            statements on a grant name it by id alone, not by id and token
 *   LOOKUP_SETTLE      a lost acquire is settled by looking its token up, not by the withdrawal insert
 *   INTENT_NO_EXPIRY   a writer's intent mark never expires (progress)
 *   LEASE_FOREVER      the reaper never reaps a grant once extended, even after its lease ran out (progress)
 */

#ifndef NC
#define NC 2
#endif
#ifndef NACQ
#define NACQ 2
#endif
#ifndef NLOST
#define NLOST 1
#endif
/* A client's token counter moves on at each grant and at each lost acquire: its tokens are distinct.
   NLOST bounds the lost replies of the whole run. */
#define TPC (NACQ + NLOST)
/* Grant log ids 1..NG-1: every grant and every withdrawal row takes one. */
#define NG (NC * (NACQ + NLOST) + 1)

#define LIVE 1
#define RELEASED 2
/* released_by */
#define HOLDER 1
#define REAPER 2
#define OPERATOR 3
#define WITHDRAWN 4

typedef Row {
  byte tok;              /* 0: no row with this id */
  unsigned st : 2;       /* status: LIVE or RELEASED */
  bit wr;                /* lock_type: 1 write, 0 read */
  byte ver;              /* version */
  bit stale;             /* STALE_SQL on the database clock: older than the cutoff, not under a lease */
#ifdef LEASE_FOREVER
  bit ext;               /* lease_until IS NOT NULL */
#endif
  unsigned by : 3;       /* released_by */
  unsigned gb : 2        /* ghost: how many times this grant's count was given back */
}

typedef Db {
  Row g[NG];
  byte next;             /* AUTO_INCREMENT */
  bit ex0;               /* resource row 0 exists (created on first use) */
  byte w0; byte r0;      /* its w_count, r_count */
  bit intent;            /* w_wait_until > NOW(6) */
  byte w1; byte r1;      /* another resource's row, free; only NO_RESOURCE_ID can touch it */
  byte biz[NC]           /* ghost business data: token of the grant each client's last business commit ran under */
}

Db db;                   /* the primary */
#ifndef NOFAILOVER
Db rep;                  /* an asynchronous replica: a prefix of the primary's commits */
bit failed;              /* the one failover has happened */
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
#ifdef LIVENESS
/* ghost: clients in a waiting acquire (for the progress property) */
byte waiting;
#define WAITING(c) waiting = waiting | (1 << (c))
#define NOT_WAITING(c) waiting = waiting & ~(1 << (c))
#else
#define WAITING(c) skip
#define NOT_WAITING(c) skip
#endif

hidden byte i, j, nw, nr;

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
#else
#define REAPER_STALE(id) (db.g[id].stale)
#endif
#define STALE(id) (db.g[id].st == LIVE && db.g[id].stale)
#ifdef LEASE_FOREVER
#define SET_EXT(id) db.g[id].ext = 1
#define COPY_EXT(to, from, j) to.g[j].ext = from.g[j].ext
#else
#define SET_EXT(id) skip
#define COPY_EXT(to, from, j) skip
#endif

/* Every property that must hold at every commit. */
inline CHECK() {
  nw = 0; nr = 0; i = 1;
  do
  :: i < NG ->
     if
     :: db.g[i].st == LIVE -> if :: db.g[i].wr -> nw++ :: else -> nr++ fi
     :: else
     fi;
     /* a count is never given back twice */
     assert(db.g[i].gb <= 1);
     /* an acquire whose reply was lost and that its caller settled as never granted never is */
     assert(db.g[i].tok == 0 || db.g[i].by == WITHDRAWN || ((nogrant[TOKCLIENT(db.g[i].tok)] >> TOKK(db.g[i].tok)) & 1) == 0);
     i++
  :: else -> break
  od;
  /* mutual exclusion over live grants: a writer alone, readers only with readers */
  assert(nw <= 1 && (nw == 0 || nr == 0));
  /* the counts equal the live grants (and no other resource's row counts them) */
  assert(db.w0 == nw && db.r0 == nr && db.w1 == 0 && db.r1 == 0);
  nw = 0; nr = 0; i = 0
}

/* Gives a grant's counts back; a count that would go below zero fails the statement (1690). */
inline GIVE_BACK(id, ok) {
  if
  :: db.g[id].wr && db.w0 >= 1 -> db.w0--; db.g[id].gb++
  :: !db.g[id].wr && db.r0 >= 1 -> db.r0--; db.g[id].gb++
  :: else -> ok = 0
  fi
}

/*
 * The acquire: procedure rwlock_acquire, or the same transaction as plain statements. tk: the
 * attempt's token; mark: a waiting writer's intent mark. id: the new grant's id, or 0.
 */
inline ACQUIRE(tk, w, mark, id) {
  id = 0;
  /* the grant row's INSERT fails on a duplicate token and rolls the whole transaction back */
  i = 1;
  do
  :: i < NG && db.g[i].tok == tk -> break
  :: i < NG && db.g[i].tok != tk -> i++
  :: else -> break
  od;
  /* nw: granted; nr: how row 0 changes (1 first use, 2 the guarded UPDATE); j: row 1 changes */
  nw = 0; nr = 0; j = 0;
  if
  :: !db.ex0 -> nr = 1
#ifdef PRECHECK
  /* the SELECT before decided (see the client); the UPDATE is not guarded */
  :: db.ex0 -> nr = 2
#else
  :: db.ex0 && w && db.w0 == 0 && db.r0 == 0 -> nr = 2
  :: db.ex0 && !w && db.w0 == 0 && !db.intent -> nr = 2
#endif
  :: else
  fi;
#ifdef NO_RESOURCE_ID
  /* no resource_id = ? in the WHERE clause: every row passing the guard changes */
  if
  :: w && db.w1 == 0 && db.r1 == 0 -> j = 1
  :: !w && db.w1 == 0 -> j = 1
  :: else
  fi;
#endif
  nw = (nr != 0 || j != 0);
  if
  :: nw && i < NG -> skip   /* rolled back: nothing changes */
  :: nw && i == NG ->
     if
     :: nr == 1 -> db.ex0 = 1; if :: w -> db.w0 = 1 :: else -> db.r0 = 1 fi
     :: nr == 2 && w -> db.w0 = 1; db.intent = 0
     :: nr == 2 && !w -> db.r0++
     :: else
     fi;
     if :: j && w -> db.w1 = 1 :: j && !w -> db.r1++ :: else fi;
     assert(db.next < NG);
     id = db.next; db.next++;
     db.g[id].tok = tk; db.g[id].st = LIVE; db.g[id].wr = w; db.g[id].ver = 0;
     db.g[id].stale = 0; db.g[id].by = 0; db.g[id].gb = 0
  :: else ->
     if :: db.ex0 && w && mark -> db.intent = 1 :: else fi
  fi;
  i = 0; j = 0; nw = 0; nr = 0
}

/*
 * RELEASE_SQL: the grant row leaves live and its count is given back, both or neither. ok: 1 when
 * it released. Used alone (release, the settling of a lost reply), as the fence, and by an operator.
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

/* The fence: the business transaction's last statement; its writes commit only with the release. */
inline FENCE(c, id, tk, w, ok) {
  RELEASE(id, tk, w, HOLDER, ok);
  if
  :: ok ->
     /* the business effect commits only under the caller's own live grant */
     assert(db.g[id].tok == tk);
     db.biz[c] = tk
  :: else
  fi
}

/* What a client forgets when a lock cycle ends (so that finished cycles leave no trace in its state). */
#define END_CYCLE d_step { NOT_WAITING(c); g = 0; ok = 0; id = 0; w = 0 }; goto next

/*
 * The lost acquire's transaction runs (on the primary it was sent to: a failover since kills it).
 * Its token is the attempt's, TOK(c, k): k moves on only once the attempt is settled.
 */
inline RUN_PENDING() {
  if :: pepoch == EPOCH -> ACQUIRE(TOK(c, k), w, 1, id); CHECK(); id = 0 :: else fi;
  pending = 0; pepoch = 0
}
/* Still in flight after the settling: it reaches the server now, or dies with its connection. */
inline LATE_PENDING(back) {
  if
  :: pending -> if :: d_step { k = k - back; RUN_PENDING(); k = k + back } :: d_step { pending = 0; pepoch = 0 } fi
  :: else
  fi
}

proctype client(byte c) {
  byte k;            /* token counter: the current attempt's token is TOK(c, k) */
  byte cyc;          /* lock cycles begun */
  byte g;            /* the grant held: its id (its token is TOK(c, k - 1)) */
  bit w;             /* its mode */
  bit ok;
  byte id;
  bit pending;       /* a lost acquire's transaction that has not reached the server yet */
  bit pepoch;        /* the failover epoch it was sent in */

next:
  do
  :: atomic { cyc < NACQ -> cyc++; WAITING(c); if :: w = 1 :: w = 0 fi };
attempt: skip;
#ifdef PRECHECK
     /* the reference's pre-check: SELECT the row, go on only if it looks free */
     if
     :: d_step { ok = (!db.ex0 || (w && db.w0 == 0 && db.r0 == 0) || (!w && db.w0 == 0 && !db.intent)) }
     fi;
     if
     :: !ok -> if :: goto attempt :: END_CYCLE fi
     :: else -> ok = 0
     fi;
#endif
     /* an acquire that waits: refused, it tries again or times out; a refused writer marks its intent */
     if
     :: d_step { ACQUIRE(TOK(c, k), w, 1, g); CHECK() } ->
        if
        :: g != 0 -> k++; goto hold
        :: else -> if :: goto attempt :: END_CYCLE fi
        fi
     :: lost < NLOST ->
        /* the acquire is sent and its reply lost: its transaction may have run, may run later or never */
        d_step { lost++; pending = 1; pepoch = EPOCH };
        if :: d_step { RUN_PENDING() } :: skip fi;
        if
        :: skip
        :: d_step { NOT_WAITING(c) }; LATE_PENDING(0); goto crashed   /* the client dies too */
        fi
     fi;
#ifdef LOOKUP_SETTLE
     /* settled by looking the token up: not found counts as never granted */
     if
     :: d_step {
          id = 0; i = 1;
          do :: i < NG && db.g[i].tok == TOK(c, k) -> id = i; break :: i < NG && db.g[i].tok != TOK(c, k) -> i++ :: else -> break od;
          i = 0;
          if :: id == 0 -> nogrant[c] = nogrant[c] | (1 << k); k++ :: else fi
        }
     fi;
     if :: id == 0 -> LATE_PENDING(1); goto attempt :: else -> id = 0 fi;
#else
     /* withdrawAcquire: a released row under the attempt's token; a duplicate means it was granted */
     if
     :: d_step {
          id = 0; i = 1;
          do :: i < NG && db.g[i].tok == TOK(c, k) -> id = i; break :: i < NG && db.g[i].tok != TOK(c, k) -> i++ :: else -> break od;
          if
          :: id == 0 ->
             assert(db.next < NG);
             db.g[db.next].tok = TOK(c, k); db.g[db.next].st = RELEASED; db.g[db.next].wr = w; db.g[db.next].ver = 0;
             db.g[db.next].stale = 0; db.g[db.next].by = WITHDRAWN; db.g[db.next].gb = 0;
             db.next++;
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
       i = 1;
       do :: i < NG && db.g[i].tok == TOK(c, k) -> break :: i < NG && db.g[i].tok != TOK(c, k) -> i++ :: else -> break od;
       if
       :: i < NG && db.g[i].st == LIVE -> g = i
       :: else -> g = 0
       fi;
       i = 0; k++
     };
     if :: g == 0 -> if :: goto attempt :: END_CYCLE fi :: else fi;
hold: skip;
     d_step { NOT_WAITING(c); ok = 1 };
     /* at most one more statement on the grant before it ends */
     if
     :: d_step {
          /* extend(): lease_until ahead, version + 1 */
          if
          :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE -> db.g[g].stale = 0; SET_EXT(g); BUMP(db.g[g].ver)
          :: else -> ok = 0
          fi;
          CHECK()
        }
     :: w ->
        d_step {
          /* downgrade(): write grant to read grant in one statement */
          if
          :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && db.g[g].wr && db.w0 >= 1 ->
             db.g[g].wr = 0; BUMP(db.g[g].ver); db.w0--; db.r0++; w = 0
          :: else -> ok = 0
          fi;
          CHECK()
        }
     :: !w ->
        d_step {
          /* tryUpgrade(): read grant to write grant while it is the one holder; else refused at once */
          if
          :: NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE && !db.g[g].wr && db.w0 == 0 && db.r0 == 1 ->
             db.g[g].wr = 1; BUMP(db.g[g].ver); db.w0 = 1; db.r0 = 0; w = 1
          :: else -> ok = (NAMED(g, TOK(c, k - 1)) && db.g[g].st == LIVE)
          fi;
          CHECK()
        }
     :: skip
     fi;
     /* found lost: the cycle ends (LockLostError) */
     if :: !ok -> END_CYCLE :: else fi;
     if
     :: d_step { FENCE(c, g, TOK(c, k - 1), w, ok); CHECK() }; END_CYCLE   /* the fenced business commit */
     :: lost < NLOST ->
        /* the business COMMIT was sent and its reply lost: it committed or rolled back */
        lost++;
        if
        :: d_step { FENCE(c, g, TOK(c, k - 1), w, ok); CHECK() }
        :: skip
        fi;
        /* settleLostCommit: release again; released now: it rolled back; else read the grant row */
        d_step { RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() };
        if
        :: ok -> d_step { assert(db.biz[c] != TOK(c, k - 1)) }    /* reported not committed */
        :: else ->
           d_step {
             i = 1;
             do :: i < NG && db.g[i].tok == TOK(c, k - 1) -> break :: i < NG && db.g[i].tok != TOK(c, k - 1) -> i++ :: else -> break od;
             /* released by the holder: the commit happened and the caller gets its value; else lost */
             if :: i < NG && db.g[i].by == HOLDER -> assert(db.biz[c] == TOK(c, k - 1)) :: else -> assert(db.biz[c] != TOK(c, k - 1)) fi;
             i = 0
           }
        fi;
        END_CYCLE
     :: d_step { RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() }; END_CYCLE   /* release() alone */
     :: lost < NLOST ->
        /* release() whose reply was lost: it ran or not; settled by releasing again */
        lost++;
        if
        :: d_step { RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() }
        :: skip
        fi;
        d_step { RELEASE(g, TOK(c, k - 1), w, HOLDER, ok); CHECK() };
        END_CYCLE
     :: goto crashed     /* the client dies holding the grant */
     fi
  :: else -> break
  od;
crashed:
  skip
}

/*
 * The reaper: a stale SELECT without locks, then the versioned release in its own transaction, one
 * grant at a time (a batch is its grants' single reaps run back to back in one transaction).
 */
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
       :: db.g[id].tok != 0 -> d_step { tk = db.g[id].tok; w = db.g[id].wr; RELEASE(id, tk, w, OPERATOR, ok); CHECK(); tk = 0; w = 0; ok = 0 }
       :: else
       fi;
       id = 0
     }
  :: skip
  fi
}

/* The database clock: grants age past the cutoff, leases and writer-intent marks run out. */
active proctype clock() {
  byte id;
  do
  /* a live grant passes the cutoff with no lease running (its lease, if any, has run out) */
  :: atomic { select(id : 1 .. NG - 1); if :: db.g[id].st == LIVE -> db.g[id].stale = 1 :: else fi; id = 0 }
  od
}

/* A writer-intent mark runs out (its own process, so that weak fairness lets it run out). */
active proctype intent_clock() {
#ifndef INTENT_NO_EXPIRY
  do
  :: db.intent -> db.intent = 0
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
     to.g[j].tok = from.g[j].tok; to.g[j].st = from.g[j].st; to.g[j].wr = from.g[j].wr; to.g[j].ver = from.g[j].ver;
     to.g[j].stale = from.g[j].stale; COPY_EXT(to, from, j);
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
  to.next = from.next; to.ex0 = from.ex0; to.w0 = from.w0; to.r0 = from.r0; to.intent = from.intent;
  to.w1 = from.w1; to.r1 = from.r1
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
#ifndef NOFAILOVER
    rep.next = 1;
#endif
    i = 0;
    do
    :: i < NC -> run client(i); i++
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
#define FREE_WITH_WAITER (waiting != 0 && db.w0 == 0 && db.r0 == 0)
/* every stale grant is eventually released (or extended): never stale for ever */
ltl stale_released { [] <> !ANY_STALE }
/* a free resource is eventually granted to a waiter (or no one waits for it any more) */
ltl free_granted { [] <> !FREE_WITH_WAITER }
#endif
