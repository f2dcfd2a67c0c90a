/**
 * Account → Runners: every runner with live online status, hostname, version, backend and capabilities, root,
 * last seen and what runs on it, updated over SSE when a runner connects or drops; delete closes its socket. "Add runner"
 * shows a one-line command carrying a short-lived, single-use registration token.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { Db } from '../../store/db.ts';
import { deleteRunner, listRunners, runnerBackendOf, runnerCapabilitiesOf } from '../../runners/service.ts';
import type { RunnerBackend, RunnerCapability } from '../../../wire/index.ts';
import type { Runner } from '../../store/schema.ts';
import type { WebDeps, WebEnv } from '../context.ts';
import { isHtmx, userName } from '../context.ts';
import { ErrorNote, Layout, when } from '../layout.tsx';
import { fragmentStream, toHtml } from '../live.ts';
import { mintRegistration } from '../../runners/registration.ts';
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
};

export function RunnerRows(p: {
  runners: readonly Runner[];
  online: ReadonlySet<string>;
  loads: ReadonlyMap<string, RunnerLoad>;
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
            <td data-label="Version">{r.version ?? '—'}</td>
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
  const rows = async (accountId: string) => (
    <RunnerRows
      runners={await listRunners(db(deps), accountId)}
      online={online(accountId)}
      loads={await runnerLoads(deps.db, accountId)}
    />
  );

  const page = async (c: import('hono').Context<WebEnv>, added?: { command: string; expiresAt: Date }) => {
    const user = c.get('user');
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
              <strong>Run this on the machine that should run your agents.</strong> The token in it works once, until{' '}
              {when(added.expiresAt)}; the runner trades it for a key of its own that can do nothing but connect as a
              runner.
            </p>
            <pre class="key" id="runner-command">
              {added.command}
            </pre>
            <p class="small muted">
              Add <code>--name &lt;name&gt;</code> to choose its name (default: the machine's hostname) and{' '}
              <code>--backend namespace</code> or <code>firecracker</code> for stronger isolation; see the{' '}
              <a href="/docs/runners">runner docs</a>.
            </p>
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

  app.post('/account/runners/add', async (c) => {
    const minted = await mintRegistration(db(deps), c.get('user').account.id);
    const origin = new URL(c.req.url).origin;
    return page(c, { command: `fountain runner --url ${origin} --token ${minted.token}`, expiresAt: minted.expiresAt });
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
