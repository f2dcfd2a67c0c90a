/**
 * The web UI as one Hono app the server mounts: static scripts, sign-in, the docs site, and the
 * signed-in pages behind the session check. `app.route('/', createWebApp(deps))` in the server's app factory.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Hono, type MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import type { WebDeps, WebEnv } from './context.ts';
import { isHtmx } from './context.ts';
import { docsRoutes } from './docs.tsx';
import { Layout, STATIC_PREFIX } from './layout.tsx';
import { agentRoutes } from './pages/agents.tsx';
import { environmentRoutes } from './pages/environments.tsx';
import { conversationRoutes } from './pages/conversation.tsx';
import { repositoryRoutes } from './pages/repository.tsx';
import { modelPickRoutes } from './pages/model-pick.tsx';
import { relocateRoutes } from './pages/relocate.tsx';
import { conversationListRoutes } from './pages/conversations.tsx';
import { keyRoutes } from './pages/keys.tsx';
import { labelPageRoutes } from './pages/labels.tsx';
import { credentialPages } from './pages/credentials.tsx';
import { webhookPages } from './pages/webhooks.tsx';
import { runnerRoutes } from './pages/runners.tsx';
import { signinRoutes } from './pages/signin.tsx';
import { teamRoutes } from './pages/team.tsx';
import { resolveSession, SESSION_COOKIE } from './session.ts';
import { turnImageRoutes } from './turn-images.tsx';

const STATIC_FILES: Readonly<Record<string, string>> = {
  'htmx.min.js': 'text/javascript; charset=utf-8',
  'htmx-ext-sse.min.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};
// Read when an app is made, not at import: every `fountain` subcommand imports this module, and the
// guest image's one-file bundle has no static/ folder beside it (it serves runner-guest, never pages).
const readStatic = () =>
  new Map(Object.keys(STATIC_FILES).map((f) => [f, readFileSync(new URL(`./static/${f}`, import.meta.url))]));

/**
 * Mermaid's browser build, for the docs pages that draw diagrams: read from its package at the first
 * request for it (it is 5 MB), never at start-up, and kept.
 */
let mermaidScript: Buffer | undefined;
const readMermaid = () =>
  (mermaidScript ??= readFileSync(createRequire(import.meta.url).resolve('mermaid/dist/mermaid.min.js')));

/** Paths behind the session check; everything else (the API) is left to the server's other routes. */
const SIGNED_IN_PATHS = [
  '/',
  '/team/*',
  '/conversations',
  '/conversations/*',
  '/agents',
  '/agents/*',
  '/environments',
  '/environments/*',
  '/account/*',
];

/** The page for an address the server does not serve (mounted as the server's not-found handler). */
export function webNotFound(c: import('hono').Context): Response | Promise<Response> {
  return c.html(
    <Layout title="Page not found" section="none" user={null}>
      <h1>Page not found</h1>
      <p>
        Nothing lives at this address. Try the <a href="/">Team page</a>, your{' '}
        <a href="/conversations">conversations</a> or the <a href="/docs">documentation</a>.
      </p>
    </Layout>,
    404,
  );
}

export function createWebApp(deps: WebDeps): Hono<WebEnv> {
  const app = new Hono<WebEnv>();
  const staticBody = readStatic();

  app.get(`${STATIC_PREFIX}/:file`, (c) => {
    const file = c.req.param('file');
    if (file === 'mermaid.min.js')
      return c.body(new Uint8Array(readMermaid()), 200, {
        'content-type': 'text/javascript; charset=utf-8',
        'cache-control': 'public, max-age=3600',
      });
    const body = staticBody.get(file);
    if (!body) return c.text('not found', 404);
    return c.body(new Uint8Array(body), 200, {
      'content-type': STATIC_FILES[file]!,
      'cache-control': 'public, max-age=3600',
    });
  });

  // State-changing requests must come from our own pages (SameSite=Lax already stops cross-site posts; this covers old browsers).
  const sameOrigin: MiddlewareHandler = async (c, next) => {
    if (c.req.method === 'POST') {
      const origin = c.req.header('origin');
      const host = c.req.header('host');
      if (origin && host && origin !== 'null' && new URL(origin).host !== host)
        return c.text('cross-site request refused', 403);
    }
    await next();
  };
  for (const p of [...SIGNED_IN_PATHS, '/signin', '/signout']) app.use(p, sameOrigin);

  app.route('/', signinRoutes(deps));

  const currentUser = async (c: import('hono').Context) => {
    const u = await resolveSession(deps.db, deps.sessionSecret, getCookie(c, SESSION_COOKIE));
    return u ? { name: u.account.name } : null;
  };
  app.route('/', docsRoutes(deps.docs, currentUser));

  const pages = new Hono<WebEnv>();
  // Only the page paths: once mounted beside the API, a catch-all here would redirect API calls too.
  const signedIn: MiddlewareHandler<WebEnv> = async (c, next) => {
    const user = await resolveSession(deps.db, deps.sessionSecret, getCookie(c, SESSION_COOKIE));
    if (!user) {
      const to = `/signin?next=${encodeURIComponent(c.req.path)}`;
      if (isHtmx(c)) {
        c.header('HX-Redirect', to);
        return c.body(null, 401);
      }
      if (c.req.header('accept')?.includes('text/event-stream')) return c.text('signed out', 401);
      return c.redirect(to, 303);
    }
    c.set('user', user);
    await next();
  };
  for (const p of SIGNED_IN_PATHS) pages.use(p, signedIn);
  pages.route('/', teamRoutes(deps));
  // Before the conversation page: /conversations/new/branches and /new/model are not conversation ids.
  pages.route('/', repositoryRoutes(deps));
  pages.route('/', modelPickRoutes(deps));
  pages.route('/', conversationListRoutes(deps));
  pages.route('/', turnImageRoutes(deps));
  pages.route('/', conversationRoutes(deps));
  pages.route('/', relocateRoutes(deps));
  pages.route('/', labelPageRoutes(deps));
  pages.route('/', agentRoutes(deps));
  pages.route('/', environmentRoutes(deps));
  pages.route('/', runnerRoutes(deps));
  pages.route('/', keyRoutes(deps));
  if (deps.credentials) pages.route('/', credentialPages({ ...deps, credentials: deps.credentials }));
  if (deps.webhooks) pages.route('/', webhookPages({ ...deps, webhooks: deps.webhooks }));
  app.route('/', pages);

  app.onError((e, c) => {
    deps.logger.error({ err: e, path: c.req.path }, 'web page failed');
    return c.html(
      '<!doctype html><meta charset="utf-8"><title>Something went wrong · Fountain</title><main style="font-family:system-ui;padding:16px"><h1>Something went wrong</h1><p>The server could not show this page. The error is in the server log; try again, or go back to the <a href="/">Team page</a>.</p></main>',
      500,
    );
  });
  return app;
}
