/**
 * The MCP servers a real agent is given in its real-agents test: a Streamable HTTP server on loopback
 * (MCP SDK, one tool, a bearer token it insists on) and the stdio fixture the runtime starts itself;
 * both record what the runtime sent them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export const STDIO_TOOL = 'fountain_stdio_probe';
export const HTTP_TOOL = 'fountain_http_probe';
export const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/mcp-stdio-probe.mjs', import.meta.url));

export interface McpSeen {
  readonly method: string | null;
  readonly authorized: boolean;
  readonly params?: unknown;
}

export interface HttpProbe {
  readonly port: number;
  readonly seen: McpSeen[];
  close(): Promise<void>;
}

/** A stateless Streamable HTTP MCP server: each POST gets a fresh server and transport, as the SDK's stateless example does. */
export async function startHttpProbe(
  token: string,
  listen: { readonly host: string; readonly port: number } = { host: '127.0.0.1', port: 0 },
): Promise<HttpProbe> {
  const seen: McpSeen[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const authorized = req.headers.authorization === `Bearer ${token}`;
        if (req.method !== 'POST') {
          // No server-initiated stream in stateless mode: the client falls back to POST only.
          res.writeHead(405, { allow: 'POST' }).end();
          return;
        }
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          res
            .writeHead(400, { 'content-type': 'application/json' })
            .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
          return;
        }
        for (const m of Array.isArray(body) ? body : [body]) {
          const msg = m as { method?: string; params?: unknown };
          seen.push({
            method: msg.method ?? null,
            authorized,
            ...(msg.method === 'tools/call' ? { params: msg.params } : {}),
          });
        }
        if (!authorized) {
          res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid_token"}');
          return;
        }
        const mcp = new McpServer({ name: 'fountain-http-probe', version: '1.0.0' });
        mcp.registerTool(
          HTTP_TOOL,
          {
            description: 'Echoes a word back, proving the HTTP MCP server is reachable.',
            inputSchema: { text: z.string() },
          },
          async ({ text }) => ({ content: [{ type: 'text', text: `fountain-http-saw:${text}` }] }),
        );
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        res.on('close', () => {
          void transport.close();
          void mcp.close();
        });
        await mcp.connect(transport);
        await transport.handleRequest(req, res, body);
      })().catch((e: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: String(e) }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(listen.port, listen.host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** The stdio fixture's log: one JSON object per line. */
export function readStdioLog(path: string): Array<Record<string, unknown>> {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
