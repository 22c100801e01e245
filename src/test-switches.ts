// The switches the tests' negative controls turn, in one place: each takes away (or adds) one piece
// of what the library does, to show that the test of that piece catches the broken variant. Not
// exported from any package entry. One object per module that reads them, named after it; each
// switch named for what it governs, its value here the library's own behaviour, so that a switch
// left at its default changes nothing. A test that turns one sets it back when it ends.

/** The switches, by the module that reads them. */
export const testSwitches: {
  /** src/sql/session.ts: `guard: false` runs the library's statements without its session handling. */
  session: { guard: boolean };
  /** src/sql/unreachable.ts: `retry: false` sends once where the library sends again while no connection can be had. */
  unreachable: { retry: boolean };
  /** src/lock/durable/privilege-probe.ts: `probe: false` acquires without first checking the user may release. */
  privilegeProbe: { probe: boolean };
  /**
   * src/lock/groups/group.ts: `callerOrder: true` takes a group's locks in the order the caller named them
   * instead of by resource bytes (any other order can deadlock); `afterFirst` is awaited once the
   * first is held; `fenceFirstOnly: true` fences the group's first grant alone; `afterOneCall` is
   * awaited once the one-call group acquire has answered (granted or not), before any fallback.
   */
  group: {
    callerOrder: boolean;
    afterFirst: (() => Promise<void>) | undefined;
    fenceFirstOnly: boolean;
    afterOneCall: ((granted: boolean) => Promise<void>) | undefined;
  };
  /**
   * src/lock/sections/section-*.ts: `idleBound: false` runs sections without the server's idle bound (the
   * paused-holder test); `guard: false` takes rows with a plain read that neither checks the counts
   * nor locks (the exclusion tests); `lockRowShared: true` makes a reading section take the lock row
   * with a shared lock, as before the gate (durable readers then cannot share with it);
   * `killThroughPool: true` interrupts a waiting section as before (KILL QUERY through the pool, not
   * awaited, the connection handed back); `onKill` is told of each KILL QUERY a section's
   * interruption sent, once it was answered; `settleWithoutRow: true` settles a lost COMMIT of a
   * section without history by its token, as one with history is (there is no row to find).
   */
  /**
   * src/sql/acquire.ts: `permitUnguarded: true` checks a permit's limit on a count read first, then
   * adds to it with an UPDATE that checks nothing (the semaphore tests' negative control);
   * `afterPermitRead`, when set, is awaited between that read and that write (in place of a short
   * sleep), so a control can hold several callers there at once and make the overlap certain;
   * `intentNeedsRowAtOnce: true` lets a writer stopped at the gate mark its intent only if it can have
   * the lock row at once, as before migration 016 (the statement path's form of that routine).
   */
  acquire: {
    permitUnguarded: boolean;
    afterPermitRead: (() => Promise<void>) | undefined;
    intentNeedsRowAtOnce: boolean;
  };
  /**
   * src/lock/durable/heal-stale.ts: `ageOnly: true` judges a grant by its age alone, ignoring its lease;
   * `rememberToCutoff: true` remembers a look that found nothing stale until the first grant's stale
   * time as seen, up to the cutoff, as if no lease could be set or shortened after the look.
   */
  heal: { ageOnly: boolean; rememberToCutoff: boolean };
  /**
   * src/lock/scheduled/maintenance.ts: `during` is awaited inside each sweep, under its grant (to hold a sweep
   * open); `refused` is called when a sweep's attempt at the grant is refused; `noGate: true` runs
   * sweeps without the grant.
   */
  maintenance: { during: (() => Promise<void>) | undefined; refused: (() => void) | undefined; noGate: boolean };
  section: {
    idleBound: boolean;
    guard: boolean;
    lockRowShared: boolean;
    killThroughPool: boolean;
    onKill: ((threadId: number) => void) | undefined;
    settleWithoutRow: boolean;
  };
} = {
  session: { guard: true },
  unreachable: { retry: true },
  privilegeProbe: { probe: true },
  group: { callerOrder: false, afterFirst: undefined, fenceFirstOnly: false, afterOneCall: undefined },
  acquire: { permitUnguarded: false, afterPermitRead: undefined, intentNeedsRowAtOnce: false },
  heal: { ageOnly: false, rememberToCutoff: false },
  maintenance: { during: undefined, refused: undefined, noGate: false },
  section: {
    idleBound: true,
    guard: true,
    lockRowShared: false,
    killThroughPool: false,
    onKill: undefined,
    settleWithoutRow: false,
  },
};
