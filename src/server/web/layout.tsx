/**
 * The page frame and the small components every page shares: header navigation with the current
 * page marked for screen readers, error notes placed next to what caused them, presence badges.
 */
import type { Child } from 'hono/jsx';

export type Section =
  | 'team'
  | 'conversations'
  | 'agents'
  | 'environments'
  | 'runners'
  | 'keys'
  | 'credentials'
  | 'webhooks'
  | 'docs'
  | 'signin'
  | 'conversation'
  | 'none';

export const STATIC_PREFIX = '/static';

export interface LayoutProps {
  readonly title: string;
  readonly section: Section;
  /** Null on public pages (sign in, docs without a session). */
  readonly user: { readonly name: string } | null;
  /** Load the htmx SSE extension (live pages). */
  readonly live?: boolean;
  /** A class on <main> (the conversation page widens it for its sidebar). */
  readonly mainClass?: string;
  readonly children?: Child;
}

const LINKS: ReadonlyArray<{ section: Section; href: string; label: string; signedIn: boolean }> = [
  { section: 'team', href: '/', label: 'Team', signedIn: true },
  { section: 'conversations', href: '/conversations', label: 'Conversations', signedIn: true },
  { section: 'agents', href: '/agents', label: 'Agents', signedIn: true },
  { section: 'environments', href: '/environments', label: 'Environments', signedIn: true },
  { section: 'runners', href: '/account/runners', label: 'Runners', signedIn: true },
  { section: 'keys', href: '/account/api-keys', label: 'API keys', signedIn: true },
  { section: 'credentials', href: '/account/credentials', label: 'Model credentials', signedIn: true },
  { section: 'webhooks', href: '/account/webhooks', label: 'Webhooks', signedIn: true },
  { section: 'docs', href: '/docs', label: 'Docs', signedIn: false },
];

export function Layout(p: LayoutProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${p.title} · Fountain`}</title>
        <link rel="icon" href={`${STATIC_PREFIX}/favicon.svg`} type="image/svg+xml" />
        <link rel="stylesheet" href={`${STATIC_PREFIX}/app.css`} />
        <script src={`${STATIC_PREFIX}/htmx.min.js`} defer></script>
        {p.live ? <script src={`${STATIC_PREFIX}/htmx-ext-sse.min.js`} defer></script> : null}
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href="/">
            Fountain
          </a>
          <nav aria-label="Main">
            {LINKS.filter((l) => p.user || !l.signedIn).map((l) => (
              <a href={l.href} aria-current={p.section === l.section ? 'page' : undefined}>
                {l.label}
              </a>
            ))}
            {p.user ? (
              <form class="inline" method="post" action="/signout">
                <button class="secondary" type="submit">
                  Sign out
                </button>
              </form>
            ) : (
              <a href="/signin" aria-current={p.section === 'signin' ? 'page' : undefined}>
                Sign in
              </a>
            )}
          </nav>
        </header>
        <main id="main" class={p.mainClass}>
          {p.children}
        </main>
      </body>
    </html>
  );
}

/** An error in words, announced to screen readers, placed beside the control it concerns. */
export function ErrorNote(p: { readonly id?: string; readonly message: string | null | undefined }) {
  return p.message ? (
    <p class="error" role="alert" id={p.id}>
      {p.message}
    </p>
  ) : null;
}

/** A labelled form control with its hint and its error, the error tied to the control by id. */
export function Field(p: { id: string; label: string; error?: string | undefined; hint?: string; children: Child }) {
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      {p.children}
      {p.hint ? (
        <p class="muted small" id={`${p.id}_hint`}>
          {p.hint}
        </p>
      ) : null}
      <ErrorNote id={`${p.id}_error`} message={p.error} />
    </div>
  );
}

export function PresenceBadge(p: { readonly state: string; readonly label: string }) {
  return <span class={`badge ${p.state}`}>{p.label}</span>;
}

export const when = (d: Date | string | null | undefined): string => {
  if (!d) return 'never';
  const date = typeof d === 'string' ? new Date(d) : d;
  return date
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
};
