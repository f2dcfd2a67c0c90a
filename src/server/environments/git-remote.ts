/**
 * The server's own look at an environment repository's remote: its branches by `git ls-remote`, with the
 * environment's token given to git in its process environment only; and the link a pushed branch is compared at.
 */
import { spawn } from 'node:child_process';
import { scrubber } from './steps.ts';

export interface RemoteBranches {
  /** Branch names (without refs/heads/), sorted, the default first. */
  readonly branches: readonly string[];
  /** The branch the remote's HEAD points at; null when it does not say. */
  readonly defaultBranch: string | null;
}

export type RemoteResult =
  | { ok: true; value: RemoteBranches }
  | { ok: false; code: 'remote_unreachable' | 'remote_auth_failed'; message: string };

/** A branch name git and a URL both take: the same characters a repository's ref may hold, no `..`, no leading `-` or `/`. */
export const BRANCH_NAME = /^(?!-)(?!\/)(?!.*\.\.)(?!.*\/\/)(?!.*\.lock$)(?!.*\/$)[A-Za-z0-9._/-]{1,200}$/;

/** How git gets a token over https without it in argv or a URL (process listings show those): an extra header. */
export function gitTokenEnv(token: string | undefined): Record<string, string> {
  if (!token) return {};
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  return {
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

/** Parses `git ls-remote --symref <url> HEAD refs/heads/*` output. */
export function parseLsRemote(text: string): RemoteBranches {
  let defaultBranch: string | null = null;
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const sym = /^ref: refs\/heads\/(\S+)\tHEAD$/.exec(line);
    if (sym) {
      defaultBranch = sym[1]!;
      continue;
    }
    const head = /^[0-9a-f]{40,64}\trefs\/heads\/(\S+)$/.exec(line);
    if (head) names.add(head[1]!);
  }
  const rest = [...names].filter((n) => n !== defaultBranch).sort();
  return { branches: defaultBranch && names.has(defaultBranch) ? [defaultBranch, ...rest] : rest, defaultBranch };
}

/**
 * Lists a remote's branches. git runs with the server's environment (so an operator's GIT_SSL_CAINFO or
 * proxy applies), never prompts, and is stopped after `timeoutMs`; the token is scrubbed from what it says.
 */
export function listRemoteBranches(url: string, token: string | undefined, timeoutMs = 20_000): Promise<RemoteResult> {
  const scrub = scrubber(token ? [token, Buffer.from(`x-access-token:${token}`).toString('base64')] : []);
  return new Promise((resolve) => {
    const child = spawn('git', ['ls-remote', '--symref', '--', url, 'HEAD', 'refs/heads/*'], {
      env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: 'true', ...gitTokenEnv(token) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let errText = '';
    child.stdout.on('data', (b: Buffer) => {
      if (out.length < 4_000_000) out += b.toString('utf8');
    });
    child.stderr.on('data', (b: Buffer) => {
      if (errText.length < 20_000) errText += b.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ ok: false, code: 'remote_unreachable', message: `git could not run: ${e.message}` });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve({ ok: true, value: parseLsRemote(out) });
      const said = scrub(errText.trim()).split('\n').slice(-3).join(' ');
      const auth = /authentication failed|401|403|could not read Username/i.test(said);
      resolve({
        ok: false,
        code: auth ? 'remote_auth_failed' : 'remote_unreachable',
        message: signal
          ? `listing the branches of ${url} took longer than ${Math.round(timeoutMs / 1000)} s`
          : `listing the branches of ${url} failed${auth ? ' (the token was refused)' : ''}: ${said || `git exited ${code}`}`,
      });
    });
  });
}

/**
 * Where a pushed branch is compared with its base: GitHub's `<repo>/compare/<base>...<branch>` for a
 * github.com (or GitHub Enterprise `github.` host) URL of the form `/<owner>/<repo>`; null for any other remote.
 */
export function compareUrl(repoUrl: string, base: string, branch: string): string | null {
  let u: URL;
  try {
    u = new URL(repoUrl);
  } catch {
    return null;
  }
  const host = u.hostname.toLowerCase();
  if (host !== 'github.com' && !host.startsWith('github.')) return null;
  const parts = u.pathname
    .replace(/\.git$/, '')
    .split('/')
    .filter(Boolean);
  if (parts.length !== 2) return null;
  const enc = (s: string) => s.split('/').map(encodeURIComponent).join('/');
  return `https://${u.host}/${parts[0]}/${parts[1]}/compare/${enc(base)}...${enc(branch)}`;
}
