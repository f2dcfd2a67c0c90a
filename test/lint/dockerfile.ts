/**
 * A minimal Dockerfile parser for the lint tests: comments, line continuations, exec (JSON) and
 * shell forms, flags, and the arguments of FROM, USER, ENV, ARG and HEALTHCHECK. No heredocs.
 */

export interface Instruction {
  /** Upper-cased keyword: FROM, RUN, ENV, … */
  readonly keyword: string;
  /** Flags before the arguments, e.g. `--from=deps` → { from: 'deps' }. */
  readonly flags: Readonly<Record<string, string>>;
  /** The arguments after the flags, continuations joined with a space. */
  readonly args: string;
  /** The exec form's array when the arguments are a JSON array of strings. */
  readonly exec: readonly string[] | null;
  /** 1-based line where the instruction starts. */
  readonly line: number;
}

export class DockerfileSyntaxError extends Error {
  constructor(
    readonly line: number,
    detail: string,
  ) {
    super(`line ${line}: ${detail}`);
    this.name = 'DockerfileSyntaxError';
  }
}

const KEYWORDS = new Set([
  'ADD',
  'ARG',
  'CMD',
  'COPY',
  'ENTRYPOINT',
  'ENV',
  'EXPOSE',
  'FROM',
  'HEALTHCHECK',
  'LABEL',
  'MAINTAINER',
  'ONBUILD',
  'RUN',
  'SHELL',
  'STOPSIGNAL',
  'USER',
  'VOLUME',
  'WORKDIR',
]);

function parseExec(text: string): string[] | null {
  if (!text.startsWith('[')) return null;
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : null;
  } catch {
    return null;
  }
}

export function parseDockerfile(text: string): Instruction[] {
  const lines = text.split(/\r?\n/);
  const out: Instruction[] = [];
  let i = 0;
  while (i < lines.length) {
    const start = i + 1;
    let logical = lines[i]!;
    i++;
    if (/^\s*(#.*)?$/.test(logical)) continue;
    // A trailing backslash continues; comment and blank lines inside a continuation are dropped, as Docker does.
    while (/\\\s*$/.test(logical)) {
      logical = logical.replace(/\\\s*$/, '');
      while (i < lines.length && /^\s*(#.*)?$/.test(lines[i]!)) i++;
      if (i >= lines.length) throw new DockerfileSyntaxError(start, 'continuation at end of file');
      logical += ` ${lines[i]!.trim()}`;
      i++;
    }
    const m = /^\s*([A-Za-z]+)(?:\s+(.*))?$/.exec(logical);
    if (!m) throw new DockerfileSyntaxError(start, `cannot read ${JSON.stringify(logical.trim())}`);
    const keyword = m[1]!.toUpperCase();
    if (!KEYWORDS.has(keyword)) throw new DockerfileSyntaxError(start, `unknown instruction ${m[1]}`);
    let rest = (m[2] ?? '').trim();
    if (/<<-?\s*['"]?[A-Za-z]/.test(rest) && (keyword === 'RUN' || keyword === 'COPY'))
      throw new DockerfileSyntaxError(start, 'heredocs are not supported');
    const flags: Record<string, string> = {};
    for (let f = /^--([a-z-]+)(?:=(\S*))?\s*/.exec(rest); f; f = /^--([a-z-]+)(?:=(\S*))?\s*/.exec(rest)) {
      flags[f[1]!] = f[2] ?? 'true';
      rest = rest.slice(f[0].length);
    }
    if (rest === '' && keyword !== 'HEALTHCHECK') throw new DockerfileSyntaxError(start, `${keyword} needs arguments`);
    out.push({ keyword, flags, args: rest, exec: parseExec(rest), line: start });
  }
  if (!out.some((x) => x.keyword === 'FROM')) throw new DockerfileSyntaxError(1, 'no FROM');
  return out;
}

/** Splits shell-like words, honouring single and double quotes and backslash escapes. */
export function words(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let have = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) cur += text[++i];
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      have = true;
    } else if (c === '\\' && i + 1 < text.length) {
      cur += text[++i];
      have = true;
    } else if (/\s/.test(c)) {
      if (have) out.push(cur);
      cur = '';
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (quote) throw new Error(`unterminated ${quote} in ${JSON.stringify(text)}`);
  if (have) out.push(cur);
  return out;
}

/** ENV and ARG pairs: `K=v K2="v 2"`, or the legacy `ENV K v with spaces`. ARG may omit a value. */
export function keyValues(ins: Instruction): Array<[string, string | undefined]> {
  const ws = words(ins.args);
  if (ins.keyword === 'ENV' && ws.length > 0 && !ws[0]!.includes('=')) return [[ws[0]!, ws.slice(1).join(' ')]];
  return ws.map((w) => {
    const eq = w.indexOf('=');
    return eq < 0 ? [w, undefined] : [w.slice(0, eq), w.slice(eq + 1)];
  });
}

export interface FromLine {
  readonly image: string;
  readonly tag: string | null;
  readonly digest: string | null;
  readonly stage: string | null;
}

/** The ARGs declared before the first FROM, with their defaults: what a FROM line may name. */
export function globalArgs(instructions: readonly Instruction[]): Map<string, string | undefined> {
  const first = instructions.findIndex((i) => i.keyword === 'FROM');
  return new Map(
    instructions
      .slice(0, first < 0 ? instructions.length : first)
      .filter((i) => i.keyword === 'ARG')
      .flatMap(keyValues),
  );
}

/** A FROM line, with `$NAME` and `${NAME}` replaced by the defaults in `args` (as a build without --build-arg sees it). */
export function parseFrom(ins: Instruction, args: ReadonlyMap<string, string | undefined> = new Map()): FromLine {
  const expanded = ins.args.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, a?: string, b?: string) => {
    const value = args.get((a ?? b)!);
    if (value === undefined) throw new DockerfileSyntaxError(ins.line, `FROM names ${whole}, an ARG without a default`);
    return value;
  });
  const ws = words(expanded);
  if (ws.length !== 1 && !(ws.length === 3 && ws[1]!.toLowerCase() === 'as'))
    throw new DockerfileSyntaxError(ins.line, `FROM ${ins.args}`);
  const ref = ws[0]!;
  const [nameTag, digest] = ref.split('@') as [string, string | undefined];
  const slash = nameTag.lastIndexOf('/');
  const colon = nameTag.lastIndexOf(':');
  const hasTag = colon > slash;
  return {
    image: hasTag ? nameTag.slice(0, colon) : nameTag,
    tag: hasTag ? nameTag.slice(colon + 1) : null,
    digest: digest ?? null,
    stage: ws.length === 3 ? ws[2]! : null,
  };
}

export interface Healthcheck {
  readonly options: Readonly<Record<string, string>>;
  /** null for `HEALTHCHECK NONE`. */
  readonly command: { readonly exec: readonly string[] | null; readonly shell: string | null } | null;
}

export function parseHealthcheck(ins: Instruction): Healthcheck {
  if (/^NONE$/i.test(ins.args)) return { options: ins.flags, command: null };
  const m = /^CMD\s+(.+)$/i.exec(ins.args);
  if (!m) throw new DockerfileSyntaxError(ins.line, 'HEALTHCHECK needs CMD or NONE');
  const exec = parseExec(m[1]!);
  return { options: ins.flags, command: { exec, shell: exec ? null : m[1]! } };
}

/** The instructions of each build stage, FROM first. */
export function stages(instructions: readonly Instruction[]): Instruction[][] {
  const out: Instruction[][] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') out.push([ins]);
    else if (out.length === 0) {
      if (ins.keyword !== 'ARG') throw new DockerfileSyntaxError(ins.line, `${ins.keyword} before the first FROM`);
    } else out.at(-1)!.push(ins);
  }
  return out;
}

/** The user in effect after a stage's last USER (root when none). */
export function finalUser(stage: readonly Instruction[]): string {
  const u = stage.filter((x) => x.keyword === 'USER').at(-1);
  return u ? u.args.split(':')[0]! : 'root';
}
