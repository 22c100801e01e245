import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const MODEL = new URL('../../model/rwlock.pml', import.meta.url).pathname;
const MODEL_LINES = readFileSync(MODEL, 'utf8').split('\n');

/** One verification: the model compiled with `defines`, a safety run or one ltl formula under weak fairness. */
export interface Check {
  defines: string[];
  /** The ltl formula to check (compiles the model with -DLIVENESS, searches for fair acceptance cycles). */
  ltl?: string;
  /** A negative control: its search stops at the first counterexample, so it is compiled quickly (-O0). */
  control?: boolean;
}

export interface Outcome {
  errors: number;
  statesStored: number;
  transitions: number;
  depth: number;
  memoryMb: number;
  seconds: number;
  /** pan's output, for a failure message. */
  output: string;
  /** A counterexample, one line per model step, when pan wrote a trail. */
  trail: string[];
}

// pan: exhaustive (no bitstate); COLLAPSE compresses stored states without losing any.
const PAN_FLAGS = ['-w', '-DCOLLAPSE', '-DVECTORSZ=2048', '-DMEMLIM=4096'];

/** Generates the verifier with `spin -a`, compiles it with gcc, runs it; all in a fresh temp dir. */
export async function verify(check: Check): Promise<Outcome> {
  const dir = mkdtempSync(join(tmpdir(), 'rwlock-model-'));
  try {
    copyFileSync(MODEL, join(dir, 'rwlock.pml'));
    const defines = [...check.defines, ...(check.ltl ? ['-DLIVENESS'] : [])];
    await run('spin', ['-a', ...defines, 'rwlock.pml'], { cwd: dir });
    // Weak fairness needs NFAIR above the number of processes; a pure safety run needs no cycle search.
    const gccFlags = [check.control ? '-O0' : '-O2', ...PAN_FLAGS, check.ltl ? '-DNFAIR=6' : '-DSAFETY'];
    await run('gcc', [...gccFlags, '-o', 'pan', 'pan.c'], { cwd: dir });
    const panArgs = check.ltl ? ['-a', '-f', '-m1000000', '-N', check.ltl] : ['-m1000000'];
    const { stdout } = await run('./pan', panArgs, { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
    const outcome = parsePan(stdout);
    if (outcome.errors > 0) {
      const { stdout: replay } = await run('spin', ['-t', '-p', ...defines, 'rwlock.pml'], {
        cwd: dir,
        maxBuffer: 64 * 1024 * 1024,
      });
      outcome.trail = condenseTrail(replay);
    }
    return outcome;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function num(text: string, re: RegExp): number {
  const m = re.exec(text);
  if (!m) throw new Error(`pan output without ${re}:\n${text}`);
  return Number(m[1]);
}

export function parsePan(out: string): Outcome {
  if (/Search not completed/.test(out) && !/errors: [1-9]/.test(out))
    throw new Error(`pan did not complete its search:\n${out}`);
  return {
    errors: num(out, /errors: (\d+)/),
    statesStored: num(out, /([\d.e+]+) states, stored/),
    transitions: num(out, /([\d.e+]+) transitions \(=/),
    depth: num(out, /depth reached (\d+)/),
    memoryMb: num(out, /([\d.]+)\s+total actual memory usage/),
    seconds: num(out, /elapsed time ([\d.e+]+) seconds/),
    output: out,
    trail: [],
  };
}

// The model's processes that run once per client: numbered by the order they started.
const CLIENTS = new Set(['client', 'campaigner', 'job']);

// Steps that only move control inside a process, not worth a line of their own.
const CONTROL = /^\[(\(1\)|else|break|DO|IF|\.\(goto\)|goto :?\w+|skip)\]$/;

/** What a model line does, in words: the comment that introduces its step, or the statement. */
function describe(line: number): string {
  const text = (MODEL_LINES[line - 1] ?? '').trim();
  if (/^(::\s*)?([^{]*->\s*)?(d_step|atomic)\s*\{$/.test(text)) {
    const next = (MODEL_LINES[line] ?? '').trim();
    const comment = /^\/\*\s*(.*?)\s*\*\/$/.exec(next);
    return comment ? comment[1]! : next;
  }
  const statement = text.replace(/\s*\/\*\s*(.*?)\s*\*\/\s*$/, '   // $1');
  // A step that begins inside a d_step: name it by the comment that opens the d_step.
  for (let up = line - 2; up >= Math.max(0, line - 4); up--) {
    const above = (MODEL_LINES[up] ?? '').trim();
    const comment = /^\/\*\s*(.*?)\s*\*\/$/.exec(above);
    if (comment) return `${comment[1]}: ${statement}`;
    if (above !== 'if' && !/^(::\s*)?([^{]*->\s*)?d_step\s*\{$/.test(above)) break;
  }
  return statement;
}

/**
 * `spin -t -p` prints every statement of a step (a d_step's whole body under one step number).
 * Condensed: one line per step, naming the process and the model line that began the step.
 */
export function condenseTrail(replay: string): string[] {
  const lines = replay.split('\n');
  // The clients (or campaigners, or job instances) in the order they started: their index is c.
  const clientPids: number[] = [];
  const out: string[] = [];
  let lastStep = -1;
  for (const l of lines) {
    const started = /^Starting (?:client|campaigner|job) with pid (\d+)/.exec(l);
    if (started) clientPids.push(Number(started[1]));
    const m = /^\s*(\d+):\s+proc\s+(\d+)\s+\((\w+)(?::\d+)?\)\s+\S+?:(\d+)\s+\(state \d+\)\s+(\[.*\])$/.exec(l);
    if (m) {
      const [, step, pid, proc, line, stmt] = m;
      if (Number(step) === lastStep || proc === ':init:' || proc === 'init' || CONTROL.test(stmt!)) continue;
      lastStep = Number(step);
      const who = CLIENTS.has(proc!) ? `${proc} ${clientPids.indexOf(Number(pid))}` : proc!;
      const action = `${who.padEnd(12)} ${describe(Number(line))}`;
      // An atomic sequence prints each of its statements as a step: keep its first line.
      if (out.at(-1)?.slice(6) === action) continue;
      out.push(`${String(step).padStart(4)}  ${action}`);
      continue;
    }
    const err =
      /^spin: (.*(assertion violated|text of failed assertion).*)$/.exec(l) ?? /^\s*<<<<<(START OF CYCLE)>>>>>/.exec(l);
    if (err) out.push(`      ${err[1]}`);
  }
  return out;
}

export function summary(name: string, o: Outcome): string {
  return `${name}: ${o.errors} errors, ${o.statesStored} states stored, ${o.transitions} transitions, depth ${o.depth}, ${o.memoryMb} MB, ${o.seconds} s`;
}
