/**
 * A local git server over https for tests: `git http-backend` (smart HTTP) behind a node https server
 * whose certificate is signed by a throwaway test CA, with repositories under `private/` requiring a
 * clone token as `x-access-token` basic auth, as GitHub takes it. Loopback unless a test gives it a
 * host-local address of its own (`at`). Tests only.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface GitHttpsServer {
  /** `https://localhost:<port>`, or `https://<name>[:<port>]` when started `at` an address. */
  readonly url: string;
  /** The test CA's certificate (PEM file), for GIT_SSL_CAINFO. */
  readonly caFile: string;
  /** Every request: method, path, and whether it carried the right token. */
  readonly requests: Array<{ method: string; path: string; authorized: boolean }>;
  /** A bare repository `<name>.git` (name may be `private/x`) with one commit holding `files`. */
  addRepo(name: string, files: Readonly<Record<string, string>>, branch?: string): void;
  /** Adds a branch to repository `name` (from its default branch) with one commit holding `files`. */
  addBranch(name: string, branch: string, files: Readonly<Record<string, string>>): void;
  /** Runs git in the bare repository `name` on the server's side (e.g. `show <branch>:<file>`) and gives its output. */
  git(name: string, args: readonly string[]): string;
  close(): Promise<void>;
}

const run = (cmd: string, args: string[], cwd?: string) =>
  execFileSync(cmd, args, {
    cwd,
    stdio: 'pipe',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: cwd ?? process.env.HOME },
  });

/** Where the server listens when not on loopback: an address of this host, the name the certificate (and the URL) carries, a port. */
export interface GitHttpsAt {
  readonly address: string;
  readonly name: string;
  readonly port?: number;
}

/** A CA and a localhost (and `at`) certificate it signed, made with openssl. */
function makeCerts(dir: string, at?: GitHttpsAt): { ca: string; key: string; cert: string } {
  const p = (f: string) => join(dir, f);
  run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=Fountain test CA',
  ]);
  run('openssl', [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    p('server.key'),
    '-out',
    p('server.csr'),
    '-subj',
    '/CN=localhost',
  ]);
  const extra = at ? `,DNS:${at.name},IP:${at.address}` : '';
  writeFileSync(p('ext.cnf'), `subjectAltName=DNS:localhost,IP:127.0.0.1${extra}\nbasicConstraints=CA:FALSE\n`);
  run('openssl', [
    'x509',
    '-req',
    '-in',
    p('server.csr'),
    '-CA',
    p('ca.pem'),
    '-CAkey',
    p('ca.key'),
    '-CAcreateserial',
    '-out',
    p('server.pem'),
    '-days',
    '2',
    '-extfile',
    p('ext.cnf'),
  ]);
  return { ca: p('ca.pem'), key: p('server.key'), cert: p('server.pem') };
}

export async function startGitHttpsServer(dir: string, token: string, at?: GitHttpsAt): Promise<GitHttpsServer> {
  mkdirSync(dir, { recursive: true });
  const certs = makeCerts(dir, at);
  const root = join(dir, 'repos');
  mkdirSync(root, { recursive: true });
  const requests: GitHttpsServer['requests'] = [];
  const expected = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
  const { readFileSync } = await import('node:fs');
  const server: Server = createServer({ key: readFileSync(certs.key), cert: readFileSync(certs.cert) }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://localhost');
    const authorized = req.headers.authorization === expected;
    requests.push({ method: req.method ?? '', path: url.pathname, authorized });
    if (url.pathname.startsWith('/private/') && !authorized) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test"' }).end('authentication required\n');
      return;
    }
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
        GIT_CONFIG_NOSYSTEM: '1',
        REMOTE_ADDR: '127.0.0.1',
        // http-backend takes a push (receive-pack) only from an authenticated user.
        ...(authorized ? { REMOTE_USER: 'x-access-token' } : {}),
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let started = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (started) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      started = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        if (i < 0) continue;
        const k = line.slice(0, i).trim();
        const v = line.slice(i + 1).trim();
        if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0]);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  });
  await new Promise<void>((r) => server.listen(at?.port ?? 0, at?.address ?? '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: at ? `https://${at.name}${port === 443 ? '' : `:${port}`}` : `https://localhost:${port}`,
    caFile: certs.ca,
    requests,
    addRepo(name, files, branch = 'main') {
      const work = join(dir, 'work', name);
      mkdirSync(work, { recursive: true });
      run('git', ['init', '-q', '-b', branch], work);
      for (const [f, content] of Object.entries(files)) {
        mkdirSync(join(work, f, '..'), { recursive: true });
        writeFileSync(join(work, f), content);
      }
      run('git', ['add', '-A'], work);
      run('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'init'], work);
      const bare = join(root, `${name}.git`);
      mkdirSync(join(bare, '..'), { recursive: true });
      run('git', ['clone', '-q', '--bare', work, bare], dir);
    },
    addBranch(name, branch, files) {
      const work = join(dir, 'work', name);
      run('git', ['checkout', '-q', '-b', branch], work);
      for (const [f, content] of Object.entries(files)) {
        mkdirSync(join(work, f, '..'), { recursive: true });
        writeFileSync(join(work, f), content);
      }
      run('git', ['add', '-A'], work);
      run('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', `on ${branch}`], work);
      run('git', ['push', '-q', join(root, `${name}.git`), `${branch}:refs/heads/${branch}`], work);
      run('git', ['checkout', '-q', '-'], work);
    },
    git(name, args) {
      return run('git', [...args], join(root, `${name}.git`)).toString('utf8');
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
