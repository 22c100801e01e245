// Shared output of the CLI: aligned tables for people, JSON for programs.

/** A duration for people: "850 ms", "12.3 s", "5m 02s", "3h 10m", "2d 04h". */
export function duration(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const total = Math.floor(s);
  const d = Math.floor(total / 86_400);
  const h = Math.floor((total % 86_400) / 3600);
  const m = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  if (d > 0) return `${d}d ${String(h).padStart(2, '0')}h`;
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
  return `${m}m ${String(sec).padStart(2, '0')}s`;
}

/** A time as the database clock gave it, to the millisecond, without a time zone guess. */
export function time(t: Date | null): string {
  if (t === null) return '-';
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${t.getFullYear()}-${p(t.getMonth() + 1)}-${p(t.getDate())} ${p(t.getHours())}:${p(t.getMinutes())}:${p(t.getSeconds())}.${p(t.getMilliseconds(), 3)}`;
}

/**
 * Characters a terminal acts on rather than shows: C0 and C1 controls, DEL, the line and paragraph
 * separators, and the bidi controls that reorder what follows (U+061C, U+200E/F, U+202A-202E,
 * U+2066-2069). A resource id, owner or reason is text from applications and may hold any of them.
 */
// eslint-disable-next-line no-control-regex
const UNSHOWN = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** Text for a terminal: every UNSHOWN character escaped (`\n`, `\u001b`, `\u202e`), so a row stays one line and shows what it holds. */
export function cell(value: string): string {
  return value.replace(UNSHOWN, (c) => {
    const short = JSON.stringify(c).slice(1, -1);
    return short.length === 2 ? short : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

/**
 * One word of a POSIX shell command line that a shell reads back as exactly `value`: in single
 * quotes (a `'` inside as `'\''`), and each UNSHOWN character, which must not reach the terminal,
 * as `"$(printf '\ooo')"` of its UTF-8 bytes: pasted, the line runs nothing but the command,
 * and printed, it holds no character the terminal acts on. A shell drops the newlines that end a
 * command substitution, so only newlines that end the value are kept as they are, in the quotes.
 */
export function shellWord(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  const trailing = /\n*$/.exec(value)![0];
  const body = value.slice(0, value.length - trailing.length);
  const quoted = (text: string): string => (text === '' ? '' : `'${text.replace(/'/g, "'\\''")}'`);
  let out = '';
  let last = 0;
  // A run that ends in a newline takes the character after it along (there is one: the body does
  // not end in a newline), so that no substitution ends in a newline.
  for (const m of body.matchAll(new RegExp(`(?:${UNSHOWN.source})+(?<=\\n).|(?:${UNSHOWN.source})+`, 'gu'))) {
    out += quoted(body.slice(last, m.index));
    const octal = [...Buffer.from(m[0], 'utf8')].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');
    out += `"$(printf '${octal}')"`;
    last = m.index + m[0].length;
  }
  out += quoted(body.slice(last) + trailing);
  return out === '' ? "''" : out;
}

/** A command line for an operator to paste: each word through shellWord. */
export function commandLine(words: string[]): string {
  return words.map(shellWord).join(' ');
}

/** Rows under a header, columns padded to their widest cell. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => [...(r[i] ?? '')].length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i]! - [...c].length)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** Key-value lines, keys padded. */
export function fields(pairs: Array<[string, string]>): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
