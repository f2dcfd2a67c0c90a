/**
 * A client for Firecracker's API: HTTP/1.1 with JSON bodies over the VMM's unix socket.
 * Failures carry Firecracker's `fault_message`; nothing here throws.
 */
import { request } from 'node:http';
import { z } from 'zod';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';

const faultSchema = z.object({ fault_message: z.string() });
export const instanceInfoSchema = z.object({
  state: z.string(),
  id: z.string().optional(),
  app_name: z.string().optional(),
  vmm_version: z.string().optional(),
});
export type InstanceInfo = z.infer<typeof instanceInfoSchema>;

export class FirecrackerApi {
  readonly #socket: string;

  constructor(socketPath: string) {
    this.#socket = socketPath;
  }

  /** Resolves with the parsed body (200) or null (204). */
  call(
    method: 'GET' | 'PUT' | 'PATCH',
    path: string,
    body: unknown,
    timeoutMs: number,
  ): Promise<Result<unknown, string>> {
    return new Promise((resolve) => {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = request(
        {
          socketPath: this.#socket,
          method,
          path,
          headers: {
            Accept: 'application/json',
            ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': payload.length } : {}),
          },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (e) => resolve(err(`${method} ${path}: ${e.message}`)));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let json: unknown = null;
            try {
              json = text ? JSON.parse(text) : null;
            } catch {
              json = text;
            }
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) return resolve(ok(json));
            const fault = faultSchema.safeParse(json);
            resolve(
              err(`${method} ${path}: ${status} ${fault.success ? fault.data.fault_message : text.slice(0, 200)}`),
            );
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
      req.on('error', (e) => resolve(err(`${method} ${path}: ${e.message}`)));
      req.end(payload);
    });
  }

  async info(timeoutMs: number): Promise<Result<InstanceInfo, string>> {
    const r = await this.call('GET', '/', undefined, timeoutMs);
    if (!r.ok) return r;
    const parsed = instanceInfoSchema.safeParse(r.value);
    return parsed.success ? ok(parsed.data) : err(`GET /: unexpected reply ${JSON.stringify(r.value).slice(0, 200)}`);
  }

  async put(path: string, body: unknown, timeoutMs = 10_000): Promise<Result<void, string>> {
    const r = await this.call('PUT', path, body, timeoutMs);
    return r.ok ? ok(undefined) : r;
  }

  async patch(path: string, body: unknown, timeoutMs = 10_000): Promise<Result<void, string>> {
    const r = await this.call('PATCH', path, body, timeoutMs);
    return r.ok ? ok(undefined) : r;
  }
}
