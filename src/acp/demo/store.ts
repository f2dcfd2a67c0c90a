/**
 * The demo agent's disk: a memory file and per-session history files under its HOME.
 * Everything lives in HOME on purpose, so a sandbox that lost its disk visibly forgets.
 */
import { appendFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SessionUpdate } from '@agentclientprotocol/sdk';

const isMissing = (e: unknown): boolean => (e as NodeJS.ErrnoException | null)?.code === 'ENOENT';

export class DemoStore {
  readonly dir: string;

  constructor(home: string) {
    this.dir = join(home, '.fountain-demo');
  }

  get memoryFile(): string {
    return join(this.dir, 'memory.txt');
  }

  async remember(text: string): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await appendFile(this.memoryFile, `${text.replace(/\r?\n/g, ' ')}\n`, 'utf8');
  }

  async recall(): Promise<string[]> {
    try {
      return (await readFile(this.memoryFile, 'utf8')).split('\n').filter((l) => l.trim() !== '');
    } catch (e) {
      if (isMissing(e)) return [];
      throw e;
    }
  }

  private historyFile(sessionId: string): string {
    // Session ids are minted here (UUIDs), but load accepts any string from the client: keep it a file name.
    return join(this.dir, 'sessions', `${encodeURIComponent(sessionId)}.jsonl`);
  }

  async createHistory(sessionId: string): Promise<void> {
    await mkdir(join(this.dir, 'sessions'), { recursive: true });
    await writeFile(this.historyFile(sessionId), '', { flag: 'wx' });
  }

  async appendHistory(sessionId: string, updates: SessionUpdate[]): Promise<void> {
    await mkdir(join(this.dir, 'sessions'), { recursive: true });
    await appendFile(this.historyFile(sessionId), updates.map((u) => `${JSON.stringify(u)}\n`).join(''), 'utf8');
  }

  /** The session's history, or null when this HOME never saw the session. */
  async readHistory(sessionId: string): Promise<SessionUpdate[] | null> {
    let text: string;
    try {
      text = await readFile(this.historyFile(sessionId), 'utf8');
    } catch (e) {
      if (isMissing(e)) return null;
      throw e;
    }
    return text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as SessionUpdate);
  }
}
