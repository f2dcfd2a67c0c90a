/**
 * Sign in with an API key, the one-time link `fountain up` prints, and sign out. The session is a
 * signed HttpOnly SameSite=Lax cookie naming the key it rests on.
 */
import { Hono, type Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { z } from 'zod';
import type { WebDeps } from '../context.ts';
import { ErrorNote, Layout } from '../layout.tsx';
import {
  checkKeyForSignIn,
  consumeSigninToken,
  mintSessionKey,
  refusedLinkMessage,
  resolveSession,
  sealSession,
  SESSION_COOKIE,
  SESSION_TTL_S,
  SIGNIN_PATH,
} from '../session.ts';

const signInForm = z.object({ api_key: z.string().max(200).default(''), next: z.string().max(500).optional() });

/** Only same-site paths: an open redirect would let a link send a fresh session anywhere. */
const safeNext = (next: string | undefined): string => (next && /^\/(?![/\\])/.test(next) ? next : '/');

function SignInPage(p: { error?: string | null; next?: string }) {
  return (
    <Layout title="Sign in" section="signin" user={null}>
      <h1>Sign in</h1>
      <form method="post" action="/signin" class="card" style="max-width:560px">
        <label for="api_key">API key</label>
        <input
          id="api_key"
          name="api_key"
          type="password"
          autocomplete="current-password"
          required
          aria-describedby={p.error ? 'api_key_hint api_key_error' : 'api_key_hint'}
          aria-invalid={p.error ? 'true' : undefined}
        />
        <p id="api_key_hint" class="muted small">
          A full-scope key (ftn_…). <code>fountain up</code> prints a one-time sign-in link instead; the CLI keeps your
          key in ~/.fountain/credentials.
        </p>
        <ErrorNote id="api_key_error" message={p.error} />
        <input type="hidden" name="next" value={p.next ?? '/'} />
        <button type="submit">Sign in</button>
      </form>
    </Layout>
  );
}

export function signinRoutes(deps: WebDeps): Hono {
  const app = new Hono();
  const startSession = (c: Context, accountId: string, keyId: string) => {
    const e = Math.floor(Date.now() / 1000) + SESSION_TTL_S;
    setCookie(c, SESSION_COOKIE, sealSession(deps.sessionSecret, { a: accountId, k: keyId, e }), {
      httpOnly: true,
      sameSite: 'Lax',
      secure: deps.secureCookies ?? false,
      path: '/',
      maxAge: SESSION_TTL_S,
    });
  };

  app.get('/signin', (c) => c.html(<SignInPage next={safeNext(c.req.query('next'))} />));

  app.post('/signin', async (c) => {
    const form = signInForm.safeParse(await c.req.parseBody());
    if (!form.success)
      return c.html(<SignInPage error="The form was incomplete; paste your API key and try again." />, 400);
    const checked = await checkKeyForSignIn(deps.db, form.data.api_key);
    if (!checked.ok) return c.html(<SignInPage error={checked.message} next={safeNext(form.data.next)} />, 401);
    startSession(c, checked.account.id, checked.key.id);
    return c.redirect(safeNext(form.data.next), 303);
  });

  app.get(SIGNIN_PATH, async (c) => {
    const token = c.req.query('token') ?? '';
    const accountId = await consumeSigninToken(deps.db, token);
    if (!accountId) {
      // Clicking the printed link again from the terminal should not look like a failure to someone already signed in.
      if (await resolveSession(deps.db, deps.sessionSecret, getCookie(c, SESSION_COOKIE))) return c.redirect('/', 303);
      return c.html(<SignInPage error={await refusedLinkMessage(deps.db, token)} />, 401);
    }
    const key = await mintSessionKey(deps.db, accountId);
    startSession(c, accountId, key.id);
    return c.redirect('/', 303);
  });

  app.post('/signout', (c) => {
    deleteCookie(c, SESSION_COOKIE, { path: '/' });
    return c.redirect('/signin', 303);
  });

  return app;
}
