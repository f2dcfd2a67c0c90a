/**
 * Account → Runners: every runner with live online status, hostname, version, backend and capabilities, root,
 * last seen and what runs on it, updated over SSE when a runner connects or drops; delete closes its socket. "Add runner"
 * shows a one-line command carrying a short-lived, single-use registration token.
 */
import { Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { z } from 'zod';
import type { Db } from '../../store/db.ts';
import { deleteRunner, listRunners, runnerBackendOf, runnerCapabilitiesOf } from '../../runners/service.ts';
import type { RunnerBackend, RunnerCapability } from '../../../wire/index.ts';
import type { Runner } from '../../store/schema.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { isHtmx, userName } from '../context.ts';
import { ErrorNote, Layout, when } from '../layout.tsx';
import { fragmentStream, toHtml } from '../live.ts';
import { REGISTRATION_TOKEN_PATTERN, REGISTRATION_TTL_MS, mintRegistration } from '../../runners/registration.ts';
import { installCommand, isLoopbackUrl, serverUrlFor } from '../../runners/artifact.ts';

/** Holds the token "Add runner" minted, so the page after the redirect (and a reload) shows the same command. */
const ADDED_COOKIE = 'fountain_runner_added';

/** "update available" when a runner reports another version than the one this server hands out. */
export function updateAvailable(reported: string | null, served: string | null): boolean {
  // A runner started from a checkout reports the bare package version; only installed artifacts carry "+<hash>".
  return reported !== null && served !== null && reported.includes('+') && reported !== served;
}
import { runnerLoads, type RunnerLoad } from '../../runners/usage.ts';

const db = (deps: WebDeps): Db => deps.db as unknown as Db;

/** A backend's name with what it means, for the cell's title. */
const BACKEND_WORDS: Readonly<Record<RunnerBackend, string>> = {
  process: 'each sandbox is a directory; agents run as the runner user (trusted mode)',
  namespace: 'each sandbox is confined: its own namespaces, cgroup and an enforced egress policy',
  microvm: 'each sandbox is a virtual machine with its own kernel',
};

const CAPABILITY_WORDS: Readonly<Record<RunnerCapability, string>> = {
  suspend: 'an idle computer is parked and wakes with the same disk',
  attach: 'a running agent survives a dropped connection and is re-attached',
  network_policy: "an environment's allowed hosts are enforced",
  stdin_write_id: 'a prompt cut off by a dropped connection is sent again, and reaches the agent once',
};

export function RunnerRows(p: {
  runners: readonly Runner[];
  online: ReadonlySet<string>;
  loads: ReadonlyMap<string, RunnerLoad>;
  /** The version of the runner this server hands out; null when it is not known. */
  served?: string | null;
}) {
  if (p.runners.length === 0) {
    return (
      <tr>
        <td colspan={10} class="muted">
          No runners yet. <strong>Add runner</strong> above gives the command to run on a machine you own.
        </td>
      </tr>
    );
  }
  return (
    <>
      {p.runners.map((r) => {
        const on = p.online.has(r.id);
        return (
          <tr data-runner={r.name} data-online={on ? 'true' : 'false'}>
            <td data-label="Name">
              <strong>{r.name}</strong>
            </td>
            <td data-label="Status">
              <span class={`badge ${on ? 'online' : 'offline'} runner-status`}>{on ? 'online' : 'offline'}</span>
            </td>
            <td data-label="Hostname">{r.hostname ?? '—'}</td>
            <td data-label="Version" class="runner-version">
              {r.version ?? '—'}
              {updateAvailable(r.version, p.served ?? null) ? (
                <>
                  {' '}
                  <span
                    class="badge update-available"
                    title={`This server hands out ${p.served}: run \`fountain-runner update\` on that machine (or start it with --auto-update)`}
                  >
                    update available
                  </span>
                </>
              ) : null}
            </td>
            <td data-label="Backend" class="runner-backend">
              {(() => {
                const b = runnerBackendOf(r);
                return b ? (
                  <span title={BACKEND_WORDS[b]}>{b}</span>
                ) : (
                  <span class="muted" title="This runner's daemon did not say (an older version)">
                    not reported
                  </span>
                );
              })()}
            </td>
            <td data-label="Capabilities" class="runner-capabilities">
              <ul class="plain small">
                {runnerCapabilitiesOf(r).map((cap) => (
                  <li data-capability={cap} title={CAPABILITY_WORDS[cap]}>
                    {cap}
                  </li>
                ))}
              </ul>
            </td>
            <td data-label="Root" class="key">
              {r.root ?? '—'}
            </td>
            <td data-label="Last seen">{on ? 'now' : when(r.lastSeenAt)}</td>
            <td data-label="Running" class="runs">
              {(() => {
                const load = p.loads.get(r.id);
                if (!load) return <span class="muted">nothing</span>;
                return (
                  <>
                    {load.count === 1 ? '1 conversation' : `${load.count} conversations`}
                    <ul class="plain small">
                      {load.conversations.map((c) => (
                        <li>
                          <a href={`/conversations/${c.id}`}>{c.title}</a>
                        </li>
                      ))}
                    </ul>
                  </>
                );
              })()}
            </td>
            <td class="actions">
              <form
                method="post"
                action={`/account/runners/${r.id}/delete`}
                class="inline"
                hx-post={`/account/runners/${r.id}/delete`}
                hx-confirm={`Delete runner ${r.name}? Its connection is closed.`}
                hx-target="#runner-result"
              >
                <button type="submit" class="danger" aria-label={`Delete runner ${r.name}`}>
                  Delete
                </button>
              </form>
            </td>
          </tr>
        );
      })}
    </>
  );
}

export function runnerRoutes(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const online = (accountId: string) => new Set((deps.runnerHost?.online(accountId) ?? []).map((i) => i.runnerId));
  const served = async (): Promise<string | null> => {
    try {
      return deps.runnerVersion ? await deps.runnerVersion() : null;
    } catch (e) {
      deps.logger.warn({ err: e }, 'the runner artifact could not be built');
      return null;
    }
  };
  const rows = async (accountId: string) => (
    <RunnerRows
      runners={await listRunners(db(deps), accountId)}
      online={online(accountId)}
      loads={await runnerLoads(deps.db, accountId)}
      served={await served()}
    />
  );

  const page = async (c: import('hono').Context<WebEnv>) => {
    const user = c.get('user');
    const token = getCookie(c, ADDED_COOKIE);
    const serverUrl = serverUrlFor(deps.publicUrl, c.req.url);
    const added = token && REGISTRATION_TOKEN_PATTERN.test(token) ? installCommand(serverUrl, token) : null;
    return c.html(
      <Layout title="Runners" section="runners" user={userName(user)} live>
        <h1>Runners</h1>
        {deps.runnersEnabled ? null : (
          <p class="notice">
            Runners are disabled on this server (SANDBOX_RUNNERS_ENABLED=false): daemons cannot connect.
          </p>
        )}
        {added ? (
          <div class="card" role="status" id="add-runner-command">
            <p>
              <strong>Run this on the machine that should run your agents.</strong> It needs Node.js 20 or newer there
              and fetches everything else from this server. The token in it works once and for an hour; the runner
              trades it for a key of its own that can do nothing but connect as a runner.
            </p>
            <pre class="key" id="runner-command">
              {added}
            </pre>
            <p>
              <button
                type="button"
                id="copy-runner-command"
                hx-on:click="const t = document.getElementById('runner-command').innerText.trim(); const b = this; if (navigator.clipboard) navigator.clipboard.writeText(t).then(() => { b.textContent = 'Copied'; }); else { const r = document.createRange(); r.selectNodeContents(document.getElementById('runner-command')); getSelection().removeAllRanges(); getSelection().addRange(r); b.textContent = 'Selected: press Ctrl-C'; }"
              >
                Copy
              </button>
            </p>
            {isLoopbackUrl(serverUrl) ? (
              <p class="notice" id="runner-loopback">
                This server knows itself only as {serverUrl}, a loopback address: other machines cannot reach it. The
                command works on this machine only; set <code>PUBLIC_URL</code> to an address other machines reach.
              </p>
            ) : null}
            <p class="small muted">
              Add <code>--name &lt;name&gt;</code> to choose its name (default: the machine's hostname),{' '}
              <code>--service</code> to keep it running as a systemd service, and <code>--backend namespace</code> or{' '}
              <code>firecracker</code> for stronger isolation; see the <a href="/docs/runners">runner docs</a>.
            </p>
            <form method="post" action="/account/runners/add/done" class="inline">
              <button type="submit">Done</button>
            </form>{' '}
            <form method="post" action="/account/runners/add" class="inline">
              <button type="submit" class="secondary">
                Add another runner
              </button>
            </form>
          </div>
        ) : (
          <form method="post" action="/account/runners/add" class="card">
            <p>
              A runner is a machine of yours that runs agents' computers. It connects out to this server; nothing needs
              to reach it.
            </p>
            <button type="submit">Add runner</button>
          </form>
        )}
        <div id="runner-result" aria-live="polite"></div>
        <div class="table card" hx-ext="sse" sse-connect="/account/runners/stream">
          <table class="stack">
            <caption class="muted small" style="text-align:left">
              Machines running <code>fountain runner</code> for your account. Status updates live.
            </caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Hostname</th>
                <th scope="col">Version</th>
                <th scope="col">Backend</th>
                <th scope="col">Capabilities</th>
                <th scope="col">Root</th>
                <th scope="col">Last seen</th>
                <th scope="col">Running</th>
                <th scope="col">
                  <span class="muted">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody id="runner-rows" sse-swap="runners">
              {await rows(user.account.id)}
            </tbody>
          </table>
        </div>
      </Layout>,
    );
  };

  app.get('/account/runners', (c) => page(c));

  // Post, redirect, get: a reload shows the same command instead of minting another token.
  app.post('/account/runners/add', async (c) => {
    const minted = await mintRegistration(db(deps), c.get('user').account.id);
    setCookie(c, ADDED_COOKIE, minted.token, {
      path: '/account/runners',
      httpOnly: true,
      sameSite: 'Lax',
      secure: deps.secureCookies ?? false,
      maxAge: Math.floor(REGISTRATION_TTL_MS / 1000),
    });
    return c.redirect('/account/runners', 303);
  });

  app.post('/account/runners/add/done', (c) => {
    deleteCookie(c, ADDED_COOKIE, { path: '/account/runners' });
    return c.redirect('/account/runners', 303);
  });

  app.get('/account/runners/stream', (c) => {
    const accountId = c.get('user').account.id;
    return fragmentStream(c, {
      refreshMs: deps.refreshMs ?? 5000,
      onError: (e) => deps.logger.warn({ err: e }, 'runners stream failed'),
      render: async () => new Map([['runners', await toHtml(await rows(accountId))]]),
      watch: (changed) => deps.watchRunners(accountId, changed),
    });
  });

  app.post('/account/runners/:id/delete', async (c) => {
    const user = c.get('user');
    const id = c.req.param('id');
    const gone = z.string().uuid().safeParse(id).success
      ? await deleteRunner(db(deps), user.account.id, id)
      : undefined;
    if (gone) deps.disconnectRunner?.(gone.id);
    if (isHtmx(c))
      return c.html(
        gone ? <p class="small">Runner {gone.name} deleted.</p> : <ErrorNote message="That runner no longer exists." />,
      );
    return gone
      ? c.redirect('/account/runners', 303)
      : c.html(
          <Layout title="Runners" section="runners" user={userName(user)}>
            <ErrorNote message="That runner no longer exists." />
          </Layout>,
          404,
        );
  });

  return app;
}
