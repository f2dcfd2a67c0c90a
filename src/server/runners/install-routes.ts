/**
 * `GET /runner/install.sh`, `/runner/manifest.json` and `/runner/artifact`: a machine becomes a runner with
 * one command that fetches everything from this server. No key: nothing here is secret (the token is).
 */
import { Hono } from 'hono';
import { ApiError } from '../http/errors.ts';
import { type RunnerArtifacts, serverUrlFor } from './artifact.ts';

export interface InstallRouteDeps {
  readonly artifacts: RunnerArtifacts;
  /** PUBLIC_URL without a trailing slash; null: the request's origin. */
  readonly publicUrl: string | null;
}

const SAFE_URL = /^https?:\/\/[^\s'"\\`$]+$/;

export function runnerInstallRoutes(deps: InstallRouteDeps): Hono {
  const app = new Hono();
  const base = (reqUrl: string): string => {
    const url = serverUrlFor(deps.publicUrl, reqUrl);
    if (!SAFE_URL.test(url))
      throw new ApiError(500, 'public_url_invalid', 'PUBLIC_URL cannot be written into a script');
    return url;
  };

  app.get('/runner/install.sh', (c) =>
    c.body(deps.artifacts.installScript(base(c.req.url)), 200, {
      'content-type': 'text/x-shellscript; charset=utf-8',
      'cache-control': 'no-store',
    }),
  );

  app.get('/runner/manifest.json', async (c) => {
    const a = await deps.artifacts.get();
    return c.json(
      { version: a.version, sha256: a.sha256, size: a.size, url: `${base(c.req.url)}/runner/artifact` },
      200,
      { 'cache-control': 'no-store' },
    );
  });

  app.get('/runner/artifact', async (c) => {
    const a = await deps.artifacts.get();
    return c.body(a.bytes as Uint8Array<ArrayBuffer>, 200, {
      'content-type': 'text/javascript; charset=utf-8',
      'content-length': String(a.size),
      'x-fountain-runner-version': a.version,
      'x-fountain-runner-sha256': a.sha256,
      'cache-control': 'no-store',
    });
  });
  return app;
}
